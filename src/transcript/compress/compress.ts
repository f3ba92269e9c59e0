import type { ChatMessage } from '../message.js';
import { MISSING_RESULT_TEXT } from '../pairs.js';
import { utf8ByteLength } from '../tokens.js';
import { isRealUserMessage } from '../groups.js';
import { hasElision } from '../prune.js';
import { type CallInfo, DEFAULT_READ_TOOLS, callsOfResults } from './calls.js';
import { trimJsonArray } from './json-array.js';
import { trimLogLines } from './log-lines.js';
import { clearedMarker, duplicateCopyOf, duplicateMarker, hasMarker, supersededMarker, textDigest } from './markers.js';
import { succeeded } from './result-outcome.js';

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
  /**
   * Optional clearing: keep the newest `keep` results of each tool (0: off), never those of `excludeTools`.
   * `acrossTools`: the newest `keep` of all tools together, and `keep` 0 clears every one (Anthropic's
   * `clear_tool_uses`, asked by the client: compaction/policy/tiers/clear-tool-uses.ts).
   */
  readonly clear: { readonly keep: number; readonly excludeTools: readonly string[]; readonly acrossTools?: boolean };
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
  /** The call it answers: the one of its id in its own step (callsOfResults). */
  readonly call: CallInfo | undefined;
  /** The result's text: its string content, or its text parts joined. */
  readonly content: string;
  /** How many real user messages come before it: turns are counted between a marker and the copy it names. */
  readonly turn: number;
  /** Whether it is a successful, non-empty copy (result-outcome.ts). */
  readonly succeeded: boolean;
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
function resultsOf(messages: readonly ChatMessage[], readTools: readonly string[] | undefined): Result[] {
  const calls = callsOfResults(messages, readTools);
  const results: Result[] = [];
  let turn = 0;
  messages.forEach((message, index) => {
    if (isRealUserMessage(message)) turn++;
    const content = message.role === 'tool' ? textOf(message.content) : null;
    if (content === null || typeof message.tool_call_id !== 'string') return;
    results.push({ index, callId: message.tool_call_id, call: calls.get(index), content, turn, succeeded: succeeded(message, content) });
  });
  return results;
}

/** Whether a call's results may be superseded, or kept once where an identical copy is: reads and idempotent commands only. */
function comparable(result: Result): boolean {
  return result.call !== undefined && result.call.kind !== 'other';
}

/**
 * Whether a result that stays raw is a copy worth pointing at: a successful,
 * non-empty result (never an error, a missing-result notice, a marker or a
 * pruned text), short enough that no pruning will ever cut it (`maxChars`).
 */
function holdsCopy(result: Result, maxChars: number): boolean {
  return result.succeeded && result.content.length <= maxChars && !result.content.includes(MISSING_RESULT_TEXT) && !hasMarker(result.content) && !hasElision(result.content);
}

/** Digests of the texts identical markers of the history name: the results holding them stay raw, so each marker stays true. */
function namedCopies(results: readonly Result[]): Set<string> {
  const named = new Set<string>();
  for (const result of results) {
    const copy = duplicateCopyOf(result.content);
    if (copy !== null) named.add(copy);
  }
  return named;
}

/** Results of each tool beyond its newest `keep`, for the optional clearing. */
function clearedIndexes(results: readonly Result[], clear: CompressSettings['clear']): Set<number> {
  const cleared = new Set<number>();
  if (clear.keep <= 0 && clear.acrossTools !== true) return cleared;
  const seen = new Map<string, number>();
  for (let position = results.length - 1; position >= 0; position--) {
    const result = results[position]!;
    const tool = result.call?.name;
    if (tool === undefined || clear.excludeTools.includes(tool)) continue;
    const counted = clear.acrossTools === true ? '' : tool;
    const count = (seen.get(counted) ?? 0) + 1;
    seen.set(counted, count);
    if (count > clear.keep) cleared.add(result.index);
  }
  return cleared;
}

/**
 * Compresses the tool results in [`from`, `to`) (the part older than the
 * protected tail); later messages count as newer copies but are never changed.
 *
 * Decided newest first, so a marker only ever names a result that stays raw:
 * a superseded result names the newest later successful result of the same
 * read or command that is kept, an identical one the newest later result
 * holding its text that is kept; with no such holder the text stays. A
 * result an identical marker of the history names (by its digest) stays raw
 * too, so a marker written by an earlier compression stays true.
 *
 * Guarantees: same length, same order; only the `content` of tool messages
 * in the range changes (a new object, every other field as it was; a string
 * stays a string, text parts become one text part);
 * every other message is returned as the same object; the input is not
 * mutated; the newest result of each call is never replaced by a marker, and
 * only a recognized command is cut by structure; `keep` (the working set)
 * is never touched; compressing the result again with the same arguments
 * returns it as is (idempotent).
 *
 * @example
 * compressToolResults(historyThatReadsAFileTwice, { from: 1, to: 5 })
 * // → the first read's result becomes "[compressed: superseded by call c2, the same read_file call made 1 turn later, …]"
 */
export function compressToolResults(
  messages: readonly ChatMessage[],
  {
    from = 0,
    to = messages.length,
    settings = DEFAULT_COMPRESS_SETTINGS,
    keep,
    holderMaxChars = Number.POSITIVE_INFINITY,
  }: {
    from?: number;
    to?: number;
    settings?: CompressSettings;
    /** Indexes of results never compressed (the working set). */
    keep?: ReadonlySet<number>;
    /** A result longer than this is pruned somewhere (`prune.max_result_chars`), so it holds no copy a marker may name. */
    holderMaxChars?: number;
  } = {},
): Compression {
  const results = resultsOf(messages, settings.readTools);
  const named = namedCopies(results);
  const cleared = clearedIndexes(results, settings.clear);
  const newestOfCall = new Map<string, Result>();
  const newestOfText = new Map<string, Result>();
  const changes = new Map<number, { text: string; kind: CompressionKind }>();
  for (let position = results.length - 1; position >= 0; position--) {
    const result = results[position]!;
    const eligible =
      result.index >= from &&
      result.index < to &&
      result.content.length >= settings.minResultChars &&
      !hasMarker(result.content) &&
      keep?.has(result.index) !== true &&
      (named.size === 0 || !named.has(textDigest(result.content)));
    const same = comparable(result);
    const change = eligible
      ? compressedText(result, settings, {
          sameCall: same ? newestOfCall.get(result.call!.key) : undefined,
          sameText: same ? newestOfText.get(result.content) : undefined,
          cleared: cleared.has(result.index),
        })
      : null;
    if (change !== null) {
      changes.set(result.index, change);
      // A command's output trimmed by its structure still shows the state now (its failures, its summary): it supersedes older runs.
      if (change.kind === 'structure' && same && result.succeeded && !newestOfCall.has(result.call!.key)) newestOfCall.set(result.call!.key, result);
      continue;
    }
    if (!holdsCopy(result, holderMaxChars)) continue;
    if (same && !newestOfCall.has(result.call!.key)) newestOfCall.set(result.call!.key, result);
    if (!newestOfText.has(result.content)) newestOfText.set(result.content, result);
  }
  if (changes.size === 0) return { messages, compressed: new Map(), bytesBefore: 0, bytesAfter: 0 };
  const out = messages.slice();
  const compressed = new Map<number, CompressionKind>();
  let bytesBefore = 0;
  let bytesAfter = 0;
  for (const result of results) {
    const change = changes.get(result.index);
    if (change === undefined) continue;
    out[result.index] = withText(messages[result.index]!, change.text);
    compressed.set(result.index, change.kind);
    bytesBefore += utf8ByteLength(result.content);
    bytesAfter += utf8ByteLength(change.text);
  }
  return { messages: out, compressed, bytesBefore, bytesAfter };
}

/**
 * The newest results in [`from`, `to`) of reads and commands the history has
 * already made more than once: a call an agent repeats (the file it edits,
 * the test it re-runs) it is likely to repeat again, and then these copies
 * are superseded. What a compression at the next crossing can be expected to
 * free beyond what it frees now.
 */
export function repeatedNewestResults(messages: readonly ChatMessage[], { from = 0, to = messages.length, settings = DEFAULT_COMPRESS_SETTINGS }: { from?: number; to?: number; settings?: CompressSettings } = {}): number[] {
  if (!settings.superseded) return [];
  const results = resultsOf(messages, settings.readTools).filter(comparable);
  const counts = new Map<string, number>();
  const newest = new Map<string, number>();
  for (const result of results) {
    counts.set(result.call!.key, (counts.get(result.call!.key) ?? 0) + 1);
    newest.set(result.call!.key, result.index);
  }
  return results
    .filter((result) => result.index >= from && result.index < to && result.content.length >= settings.minResultChars && !hasMarker(result.content))
    .filter((result) => (counts.get(result.call!.key) ?? 0) > 1 && newest.get(result.call!.key) === result.index)
    .map((result) => result.index);
}

function compressedText(
  result: Result,
  settings: CompressSettings,
  found: { sameCall: Result | undefined; sameText: Result | undefined; cleared: boolean },
): { text: string; kind: CompressionKind } | null {
  const bytes = (): number => utf8ByteLength(result.content);
  const tool = result.call?.name ?? 'the tool';
  const { sameCall, sameText } = found;
  if (settings.superseded && sameCall !== undefined) return { text: supersededMarker(tool, sameCall.callId, sameCall.turn - result.turn, bytes()), kind: 'superseded' };
  if (settings.identical && sameText !== undefined) return { text: duplicateMarker(sameText.callId, sameText.turn - result.turn, bytes(), textDigest(result.content)), kind: 'identical' };
  if (found.cleared) return { text: clearedMarker(tool, bytes()), kind: 'cleared' };
  // Trimming by structure is for recognized command output only (a test run, a build, a listing, a search): never a read, never a tool not known.
  if (!settings.structure || result.call?.kind !== 'command') return null;
  const trimmed = trimJsonArray(result.content, settings.keepItems) ?? trimLogLines(result.content, settings.keepLines, MIN_STRUCTURE_SAVING);
  if (trimmed === null || trimmed.length > result.content.length * (1 - MIN_STRUCTURE_SAVING)) return null;
  return { text: trimmed, kind: 'structure' };
}
