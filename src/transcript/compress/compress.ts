import type { ChatMessage } from '../message.js';
import { MISSING_RESULT_TEXT } from '../pairs.js';
import { utf8ByteLength } from '../tokens.js';
import { type CallInfo, DEFAULT_READ_TOOLS, callsById, isRead } from './calls.js';
import { trimJsonArray } from './json-array.js';
import { trimLogLines } from './log-lines.js';
import { clearedMarker, duplicateMarker, hasMarker, supersededMarker } from './markers.js';

/**
 * Compression of old tool results, model-free: what a conversation that
 * re-reads files and re-runs commands can lose without losing anything the
 * model needs now (DESIGN.md § Compression). In order of what it tries:
 *
 * 1. superseded: a result of a call repeated later (same tool, same
 *    arguments: a re-read file, a re-run test) becomes a marker naming the
 *    newest call of it, whose result holds the newer copy;
 * 2. identical: a result identical to a later one is kept once, there;
 * 3. cleared (optional, off by default): every result of a tool but its
 *    newest `keep`, except `excludeTools` (Anthropic's `clear_tool_uses`);
 * 4. structure: JSON arrays keep their first, last and error-like items, logs
 *    and test output their error, summary, first and last lines. Reads (a
 *    file's text) are never cut by structure.
 *
 * The newest copy of every call is left as it is, results outside
 * [`from`, `to`) are never touched, and a result already carrying a marker is
 * never compressed again, so compressing a compressed history changes nothing.
 */

export interface CompressSettings {
  readonly superseded: boolean;
  readonly identical: boolean;
  readonly structure: boolean;
  /** Results shorter than this (characters) are left alone: a marker would save next to nothing. */
  readonly minResultChars: number;
  /** JSON arrays: items kept at each end. */
  readonly keepItems: number;
  /** Logs: lines kept at each end. */
  readonly keepLines: number;
  /** Optional clearing: keep the newest `keep` results of each tool (0: off), never those of `excludeTools`. */
  readonly clear: { readonly keep: number; readonly excludeTools: readonly string[] };
  /** Tools whose results are reads (never trimmed by structure) besides those whose arguments are a path: `isRead`. */
  readonly readTools?: readonly string[];
}

export const DEFAULT_COMPRESS_SETTINGS: CompressSettings = {
  superseded: true,
  identical: true,
  structure: true,
  minResultChars: 400,
  keepItems: 3,
  keepLines: 5,
  clear: { keep: 0, excludeTools: [] },
  readTools: DEFAULT_READ_TOOLS,
};

/** Below this share of its size saved, a structural trim is not worth changing the result (Cline's ≥ 30% rule). */
const MIN_STRUCTURE_SAVING = 0.3;

export type CompressionKind = 'superseded' | 'identical' | 'cleared' | 'structure';

export interface Compression {
  /** The history, compressed: the input array itself when nothing changed. */
  readonly messages: readonly ChatMessage[];
  /** Indexes of the results compressed, and how. */
  readonly compressed: ReadonlyMap<number, CompressionKind>;
  /** UTF-8 bytes of the compressed results before and after. */
  readonly bytesBefore: number;
  readonly bytesAfter: number;
}

interface Result {
  readonly index: number;
  readonly callId: string;
  readonly call: CallInfo | undefined;
  /** The result's text: its string content, or its text parts joined. */
  readonly content: string;
}

/**
 * The text of a tool result: a string, or a list of text parts (qwen-code
 * sends every tool result so); null for anything else (an image part), which
 * is never compressed.
 */
function textOf(content: ChatMessage['content']): string | null {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content) || content.length === 0) return null;
  let text = '';
  for (const part of content) {
    if (part.type !== 'text' || typeof part['text'] !== 'string') return null;
    text += part['text'];
  }
  return text;
}

/** The message with its text replaced, in the shape it came: a string, or one text part. */
function withText(message: ChatMessage, text: string): ChatMessage {
  return { ...message, content: typeof message.content === 'string' ? text : [{ type: 'text', text }] };
}

/** The tool results of the history that are text, with their calls, oldest first. */
function resultsOf(messages: readonly ChatMessage[]): Result[] {
  const calls = callsById(messages);
  const results: Result[] = [];
  messages.forEach((message, index) => {
    const content = message.role === 'tool' ? textOf(message.content) : null;
    if (content === null || typeof message.tool_call_id !== 'string') return;
    results.push({ index, callId: message.tool_call_id, call: calls.get(message.tool_call_id), content });
  });
  return results;
}

/** Whether a result holds a copy worth pointing at (not a missing-result notice, not itself a marker). */
function holdsCopy(result: Result): boolean {
  return !result.content.includes(MISSING_RESULT_TEXT) && !hasMarker(result.content);
}

/** For each result, the newest later result holding a copy of the same call (superseded) or of the same text (identical). */
function laterCopies(results: readonly Result[]): { bySameCall: Map<number, Result>; bySameText: Map<number, Result> } {
  const newestOfCall = new Map<string, Result>();
  const newestOfText = new Map<string, Result>();
  const bySameCall = new Map<number, Result>();
  const bySameText = new Map<number, Result>();
  for (let position = results.length - 1; position >= 0; position--) {
    const result = results[position]!;
    const key = result.call?.key;
    if (key !== undefined) {
      const newer = newestOfCall.get(key);
      if (newer !== undefined) bySameCall.set(result.index, newer);
      else if (holdsCopy(result)) newestOfCall.set(key, result);
    }
    const same = newestOfText.get(result.content);
    if (same !== undefined) bySameText.set(result.index, same);
    else if (holdsCopy(result)) newestOfText.set(result.content, result);
  }
  return { bySameCall, bySameText };
}

/** Results of each tool beyond its newest `keep`, for the optional clearing. */
function clearedIndexes(results: readonly Result[], clear: CompressSettings['clear']): Set<number> {
  const cleared = new Set<number>();
  if (clear.keep <= 0) return cleared;
  const seen = new Map<string, number>();
  for (let position = results.length - 1; position >= 0; position--) {
    const result = results[position]!;
    const tool = result.call?.name;
    if (tool === undefined || clear.excludeTools.includes(tool)) continue;
    const count = (seen.get(tool) ?? 0) + 1;
    seen.set(tool, count);
    if (count > clear.keep) cleared.add(result.index);
  }
  return cleared;
}

/**
 * Compresses the tool results in [`from`, `to`) (the part older than the
 * protected tail); later messages count as newer copies but are never changed.
 *
 * Guarantees: same length, same order; only the `content` of tool messages
 * in the range changes (a new object, every other field as it was; a string
 * stays a string, text parts become one text part);
 * every other message is returned as the same object; the input is not
 * mutated; the newest result of each call is never replaced by a marker, and
 * a read is never cut by structure; compressing the result again with the
 * same arguments returns it as is (idempotent).
 *
 * @example
 * compressToolResults(historyThatReadsAFileTwice, { from: 1, to: 5 })
 * // → the first read's result becomes "[compressed: superseded by call c2, the same read_file call made later (N bytes removed)]"
 */
export function compressToolResults(
  messages: readonly ChatMessage[],
  { from = 0, to = messages.length, settings = DEFAULT_COMPRESS_SETTINGS }: { from?: number; to?: number; settings?: CompressSettings } = {},
): Compression {
  const results = resultsOf(messages);
  const { bySameCall, bySameText } = laterCopies(results);
  const cleared = clearedIndexes(results, settings.clear);
  const compressed = new Map<number, CompressionKind>();
  let out: ChatMessage[] | undefined;
  let bytesBefore = 0;
  let bytesAfter = 0;
  for (const result of results) {
    if (result.index < from || result.index >= to) continue;
    if (result.content.length < settings.minResultChars || hasMarker(result.content)) continue;
    const change = compressedText(result, settings, { sameCall: bySameCall.get(result.index), sameText: bySameText.get(result.index), cleared: cleared.has(result.index) });
    if (change === null) continue;
    out ??= messages.slice();
    out[result.index] = withText(messages[result.index]!, change.text);
    compressed.set(result.index, change.kind);
    bytesBefore += utf8ByteLength(result.content);
    bytesAfter += utf8ByteLength(change.text);
  }
  return { messages: out ?? messages, compressed, bytesBefore, bytesAfter };
}

/**
 * The newest results in [`from`, `to`) of calls the history has already made
 * more than once: a call an agent repeats (the file it edits, the test it
 * re-runs) it is likely to repeat again, and then these copies are superseded.
 * What a compression at the next crossing can be expected to free beyond what
 * it frees now.
 */
export function repeatedNewestResults(messages: readonly ChatMessage[], { from = 0, to = messages.length, settings = DEFAULT_COMPRESS_SETTINGS }: { from?: number; to?: number; settings?: CompressSettings } = {}): number[] {
  if (!settings.superseded) return [];
  const results = resultsOf(messages);
  const counts = new Map<string, number>();
  for (const result of results) if (result.call !== undefined) counts.set(result.call.key, (counts.get(result.call.key) ?? 0) + 1);
  const { bySameCall } = laterCopies(results);
  return results
    .filter((result) => result.index >= from && result.index < to && result.content.length >= settings.minResultChars && !hasMarker(result.content))
    .filter((result) => result.call !== undefined && (counts.get(result.call.key) ?? 0) > 1 && !bySameCall.has(result.index))
    .map((result) => result.index);
}

function compressedText(
  result: Result,
  settings: CompressSettings,
  found: { sameCall: Result | undefined; sameText: Result | undefined; cleared: boolean },
): { text: string; kind: CompressionKind } | null {
  const bytes = (): number => utf8ByteLength(result.content);
  const tool = result.call?.name ?? 'the tool';
  if (settings.superseded && found.sameCall !== undefined) return { text: supersededMarker(tool, found.sameCall.callId, bytes()), kind: 'superseded' };
  if (settings.identical && found.sameText !== undefined) return { text: duplicateMarker(found.sameText.callId, bytes()), kind: 'identical' };
  if (found.cleared) return { text: clearedMarker(tool, bytes()), kind: 'cleared' };
  if (!settings.structure || result.call === undefined || isRead(result.call, settings.readTools)) return null;
  const trimmed = trimJsonArray(result.content, settings.keepItems) ?? trimLogLines(result.content, settings.keepLines, MIN_STRUCTURE_SAVING);
  if (trimmed === null || trimmed.length > result.content.length * (1 - MIN_STRUCTURE_SAVING)) return null;
  return { text: trimmed, kind: 'structure' };
}
