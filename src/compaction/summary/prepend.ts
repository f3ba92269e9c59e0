import type { ChatMessage } from '../../transcript/message.js';
import { contentText } from '../../transcript/message.js';
import { isMarked } from '../../transcript/marks.js';
import { renderTranscript } from '../../transcript/render.js';
import { chunkTranscript } from './chunks.js';
import { callForNotes } from './notes.js';
import { DEFAULT_SUMMARY_SYSTEM_PROMPT, keptFilesOf, prependRequestText } from './prompt.js';
import { prependRequestBody } from './request-body.js';
import type { ChatCall } from '../ports.js';
import type { SummarizeRequest } from '../types.js';

/**
 * Prepend mode, the fallback: a fresh request with the summary system prompt
 * and the old part rendered as plain text (never replayed as messages, so no
 * half pair reaches the wire), folded chunk by chunk when it is larger than
 * the window. Earlier notes travel in their own section, to be updated.
 */

/** Room a prepend-mode request keeps for its own words: section titles and the task, with margin. */
const INSTRUCTION_TOKENS = 400;

/** The smallest chunk worth a call: below it the window is taken by the prompt and the notes, not the transcript. */
const MIN_CHUNK_TOKENS = 256;

/** Notes in prepend mode; throws when a call fails, answers without text, or the window has no room for a chunk. */
export async function summarizePrepend(request: SummarizeRequest, call: ChatCall): Promise<string> {
  const { messages, earlierNotes } = oldMessagesOf(request);
  const rendered = messages.map((message) => renderTranscript([message]));
  const tokensOfText = (text: string): number => request.sizeOfMessages([{ role: 'user', content: text }], false);
  const system = tokensOfText(request.instructions ?? request.systemPrompt ?? DEFAULT_SUMMARY_SYSTEM_PROMPT);
  // Each fold step carries the running notes (at most maxTokens) besides its chunk.
  const chunkTokens =
    request.window === null
      ? Number.POSITIVE_INFINITY
      : request.window - system - 2 * request.maxTokens - 2 * INSTRUCTION_TOKENS;
  if (chunkTokens < MIN_CHUNK_TOKENS) throw new Error(`the summarizer's window (${request.window} tokens) leaves no room for a transcript chunk`);
  const chunks = chunkTranscript(rendered, chunkTokens, tokensOfText);
  let notes = earlierNotes;
  for (const [index, chunk] of chunks.entries()) {
    request.onProgress?.({ messages: messages.length, chunk: index + 1, chunks: chunks.length });
    notes = await callForNotes(
      call,
      prependRequestBody(request, prependRequestText({ transcript: chunk, earlierNotes: notes, part: { index: index + 1, count: chunks.length }, ...keptFilesOf(request) })),
      request.signal,
    );
  }
  if (notes === null) throw new Error('there was nothing to summarize');
  return notes;
}

/**
 * The old part as prepend mode sees it: without compactor's earlier notes,
 * which travel in their own section. Only messages where an epoch put them
 * are compactor's; one a client wrote that starts like a mark is transcript.
 */
function oldMessagesOf(request: SummarizeRequest): { messages: ChatMessage[]; earlierNotes: string | null } {
  let earlierNotes = request.earlierNotes;
  const messages: ChatMessage[] = [];
  for (let index = request.head; index < request.cut; index++) {
    const message = request.candidate[index]!;
    if (!request.marked.has(index)) {
      messages.push(message);
      continue;
    }
    if (isMarked(message, 'summary')) {
      // Without the epoch's notes (a store that lost them), read them back from the pair's user message.
      if (earlierNotes === null && message.role === 'user') earlierNotes = contentText(message.content).replace(/^\[compacted:summary\] /, '');
      continue;
    }
    if (isMarked(message, 'steps')) {
      const notes = notesPrefix(message);
      if (earlierNotes === null && notes !== null) earlierNotes = notes.replace(/^\[compacted:steps\] /, '');
      messages.push(withoutNotes(message));
      continue;
    }
    messages.push(message);
  }
  return { messages, earlierNotes };
}

/** The marked notes a steps compaction put at the head of an assistant message (a first text part, or the whole string before its last blank line). */
function notesPrefix(message: ChatMessage): string | null {
  const { content } = message;
  if (Array.isArray(content)) {
    const first = content[0]?.['text'];
    return typeof first === 'string' ? first.trimEnd() : null;
  }
  return typeof content === 'string' ? content : null;
}

/**
 * The assistant message without the notes at its head. A list keeps its own
 * parts; a string keeps nothing, since the notes cannot be told apart from the
 * message's text there (and the epoch's notes already carry what it said).
 */
function withoutNotes(message: ChatMessage): ChatMessage {
  const { content } = message;
  if (Array.isArray(content)) return { ...message, content: content.slice(1) };
  return { ...message, content: '' };
}
