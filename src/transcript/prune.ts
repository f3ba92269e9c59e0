import { type ChatMessage } from './message.js';
import { safeCutIndex, splitsSurrogatePair } from './text.js';
import { utf8ByteLength } from './tokens.js';

/**
 * Tool-result pruning: a long tool result keeps its head and its tail, and its
 * middle becomes a marker saying how many UTF-8 bytes were dropped. The head
 * usually holds the command and its first lines, the tail the final status or
 * error, which is why they are kept and the middle is not.
 */

/** The default `prune.max_result_chars`: 8 KiB of text, about 2k tokens, enough for most command output. */
export const DEFAULT_MAX_RESULT_CHARS = 8192;

/** Share of the kept characters that come from the head; the tail gets the rest. */
const HEAD_SHARE = 4 / 5;

const MARKER_BEFORE = '\n[… ';
const MARKER_AFTER = ' bytes elided …]\n';

/** The marker that replaces a dropped middle of `bytes` UTF-8 bytes. */
export function elisionMarker(bytes: number): string {
  return `${MARKER_BEFORE}${bytes}${MARKER_AFTER}`;
}

/** Whether a text carries an elision marker: it was pruned, and holds no whole copy of anything. */
export function hasElision(text: string): boolean {
  const at = text.indexOf(MARKER_BEFORE);
  return at !== -1 && text.indexOf(MARKER_AFTER, at) !== -1;
}

/** Length of the marker for a middle whose byte count has `digits` digits. */
function markerLength(digits: number): number {
  return MARKER_BEFORE.length + digits + MARKER_AFTER.length;
}

function assertLimit(maxChars: number): void {
  if (!(Number.isInteger(maxChars) && maxChars >= 0) && maxChars !== Infinity) {
    throw new RangeError(`maxChars must be a non-negative integer or Infinity, got ${maxChars}`);
  }
}

/**
 * Shortens a text to at most `maxChars` characters (JavaScript string length)
 * by replacing its middle with `\n[… N bytes elided …]\n`, N being the UTF-8
 * bytes of the dropped middle in plain digits. Of the characters kept, the
 * head has four fifths (rounded up) and the tail the rest.
 *
 * Guarantees:
 * - a text of at most `maxChars` characters is returned as is;
 * - the result has at most `maxChars` characters, so pruning it again returns
 *   it unchanged (idempotent);
 * - the result is `head + marker + tail` where `head` is a prefix and `tail` a
 *   suffix of the text, and bytes(head) + N + bytes(tail) = bytes(text);
 * - the cuts never separate a surrogate pair (a kept character is kept
 *   whole), so a well-formed text gives a well-formed result; a lone
 *   surrogate already in the text is kept as it is when it falls in the head
 *   or the tail. Such a cut costs the head or the tail one character, so the
 *   result may be a character or two shorter than `maxChars`;
 * - the kept part is as long as the limit allows.
 *
 * When `maxChars` cannot hold even the marker for dropping the whole text
 * (21 characters plus the digits of the text's byte count; never a sensible
 * setting), the result is that marker cut to `maxChars` characters: still at
 * most the limit, still idempotent, still visibly an elision, but the byte
 * count may be cut off.
 * `Infinity` means no limit. A negative or fractional limit throws a
 * `RangeError`.
 *
 * @example
 * pruneText('a'.repeat(100), 50) // → 'a'.repeat(22) + '\n[… 73 bytes elided …]\n' + 'a'.repeat(5)
 */
export function pruneText(text: string, maxChars: number): string {
  assertLimit(maxChars);
  if (text.length <= maxChars) return text;

  const totalBytes = utf8ByteLength(text);
  // The marker's length depends on the digits of N, and N on how much the
  // marker leaves room for. Try the fewest digits first: the first count that
  // holds N keeps the most text. The digits of the whole text always hold it.
  const maxDigits = String(totalBytes).length;
  for (let digits = 1; digits <= maxDigits; digits++) {
    const kept = maxChars - markerLength(digits);
    if (kept < 0) continue;
    let headEnd = Math.ceil(kept * HEAD_SHARE);
    let tailStart = text.length - (kept - headEnd);
    headEnd = safeCutIndex(text, headEnd);
    if (splitsSurrogatePair(text, tailStart)) tailStart++;
    const head = text.slice(0, headEnd);
    const tail = text.slice(tailStart);
    const elided = totalBytes - utf8ByteLength(head) - utf8ByteLength(tail);
    if (String(elided).length <= digits) return `${head}${elisionMarker(elided)}${tail}`;
  }
  // Not even the marker for the whole text fits: keep what fits of it.
  return elisionMarker(totalBytes).slice(0, maxChars);
}

/** Which messages pruning may touch: those in the index range [`from`, `to`) that `shouldPrune` accepts. */
export interface PruneOptions {
  /** First index that may be pruned; default 0. Clamped to [0, length]. */
  readonly from?: number;
  /** Index just past the last one that may be pruned; default the length. Clamped to [0, length]. */
  readonly to?: number;
  /**
   * A further condition, asked only of tool messages in the range whose string
   * content is longer than the limit (the ones that would be pruned); default:
   * prune them all. It must be pure for the result to stay idempotent.
   */
  readonly shouldPrune?: (message: ChatMessage, index: number) => boolean;
}

/**
 * Prunes every `tool` message in [`from`, `to`) whose content is a string
 * longer than `maxResultChars` (and that `shouldPrune` accepts, when given),
 * with {@link pruneText}. The compaction tier passes the range older than the
 * protected tail; the "big results first" step passes no range, or a
 * predicate picking the results above a quarter of the budget.
 *
 * Guarantees: same length, same order; only the `content` of such tool
 * messages changes (each changed message is a new object with every other
 * field as it was); every other message is returned as the same object, and
 * content-part arrays are never touched; the input is not mutated; the result
 * is idempotent (pruning it again with the same arguments returns it as is).
 * When nothing is pruned the input array itself is returned, so
 * `result !== messages` tells whether anything changed. (A mutable array in
 * gives a mutable array out, a readonly one a readonly one.)
 *
 * @example
 * pruneToolResults([{ role: 'tool', tool_call_id: 'c1', content: 'x'.repeat(10_000) }])
 * // → [{ role: 'tool', tool_call_id: 'c1', content: 'x'.repeat(6534) + '\n[… 1833 bytes elided …]\n' + 'x'.repeat(1633) }]
 */
export function pruneToolResults(messages: ChatMessage[], maxResultChars?: number, options?: PruneOptions): ChatMessage[];
export function pruneToolResults(
  messages: readonly ChatMessage[],
  maxResultChars?: number,
  options?: PruneOptions,
): readonly ChatMessage[];
export function pruneToolResults(
  messages: readonly ChatMessage[],
  maxResultChars: number = DEFAULT_MAX_RESULT_CHARS,
  { from = 0, to = messages.length, shouldPrune }: PruneOptions = {},
): readonly ChatMessage[] {
  assertLimit(maxResultChars);
  const start = Math.max(0, Math.min(from, messages.length));
  const end = Math.max(start, Math.min(to, messages.length));
  let pruned: ChatMessage[] | undefined;
  for (let index = start; index < end; index++) {
    const message = messages[index]!;
    if (message.role !== 'tool' || typeof message.content !== 'string') continue;
    if (message.content.length <= maxResultChars) continue;
    if (shouldPrune !== undefined && !shouldPrune(message, index)) continue;
    // Copy the array only once something changes, so "nothing to prune" costs no allocation.
    pruned ??= messages.slice();
    pruned[index] = { ...message, content: pruneText(message.content, maxResultChars) };
  }
  return pruned ?? messages;
}
