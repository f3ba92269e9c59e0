/**
 * The transcript core, also published as `compactor/transcript`: pure
 * functions over chat messages (no I/O, no Fastify, no undici), which the
 * compaction engine and the HTTP layer build on.
 */

export {
  ChatMessageSchema,
  ChatMessagesSchema,
  ContentPartSchema,
  ToolCallSchema,
  contentText,
  toolCallsOf,
  isToolResult,
  type ChatMessage,
  type ContentPart,
  type ToolCall,
} from './message.js';
export { mark, isMarked, type MarkStrategy } from './marks.js';
export {
  findPairProblems,
  repairPairs,
  describePairProblem,
  missingResult,
  MISSING_RESULT_TEXT,
  type PairProblem,
  type PairProblemKind,
  type PairRepair,
} from './pairs.js';
export * from './groups.js';
export {
  estimateTokens,
  estimateMessagesTokens,
  estimateMessageTokens,
  estimateRequestTokens,
  estimateToolsTokens,
  FRAMING_TOKENS_PER_MESSAGE,
  MEDIA_PART_TOKENS,
  type TokenEstimateRequest,
} from './tokens.js';
export { pruneToolResults, pruneText, DEFAULT_MAX_RESULT_CHARS, type PruneOptions } from './prune.js';
export { renderTranscript } from './render.js';
export { compressToolResults, DEFAULT_COMPRESS_SETTINGS, type Compression, type CompressionKind, type CompressSettings } from './compress/compress.js';
