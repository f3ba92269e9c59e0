import type { ChatMessage } from './message.js';

/**
 * Groups of a transcript, as half-open index ranges `[start, end)` into the
 * message array: the head (leading system/developer messages), turns (a real
 * user message and everything up to the next one) and steps (an assistant
 * message and the tool results right after it). Compaction works on these
 * groups, never on single messages, so no cut can separate a call from its
 * results.
 */

export interface Range {
  readonly start: number;
  readonly end: number;
}

function isHeadRole(role: string): boolean {
  return role === 'system' || role === 'developer';
}

/**
 * A user message that starts a turn, whatever its text: one that starts like
 * a mark is a client's (a pasted log, a fetched page) unless an epoch put it
 * there, and text alone cannot tell. compactor's own user messages (a summary
 * pair, a truncation notice) stand right after the head, where no turn is
 * started (the first turn begins there anyway) and no task anchors (a kept
 * turn follows them).
 */
export function isRealUserMessage(message: ChatMessage): boolean {
  return message.role === 'user';
}

/**
 * How many leading system/developer messages there are.
 *
 * @example
 * headLength([{ role: 'system', content: 'x' }, { role: 'user', content: 'hi' }]) // → 1
 */
export function headLength(messages: readonly ChatMessage[]): number {
  let length = 0;
  while (length < messages.length && isHeadRole(messages[length]!.role)) length++;
  return length;
}

/**
 * The turns after the head as index ranges, covering `[from, messages.length)`
 * without gaps (`from` defaults to the head length). Messages before the first
 * real user message form a turn of their own (that is where a summary pair sits).
 *
 * @example
 * turnRanges([system, user1, assistant1, user2]) // → [{ start: 1, end: 3 }, { start: 3, end: 4 }]
 */
export function turnRanges(messages: readonly ChatMessage[], from = headLength(messages)): Range[] {
  const ranges: Range[] = [];
  let start = from;
  for (let index = from + 1; index < messages.length; index++) {
    if (isRealUserMessage(messages[index]!)) {
      ranges.push({ start, end: index });
      start = index;
    }
  }
  if (start < messages.length) ranges.push({ start, end: messages.length });
  return ranges;
}

/**
 * The steps inside `range`: each assistant message with the tool messages
 * right after it. Messages of the range that belong to no step (the user
 * message that opens a turn, a stray tool result) are not covered.
 *
 * @example
 * stepRanges([user, assistantWithCall, toolResult, assistant], { start: 0, end: 4 })
 * // → [{ start: 1, end: 3 }, { start: 3, end: 4 }]
 */
export function stepRanges(messages: readonly ChatMessage[], range: Range): Range[] {
  const ranges: Range[] = [];
  for (let index = range.start; index < range.end; index++) {
    if (messages[index]!.role !== 'assistant') continue;
    const end = firstNonToolIndex(messages, index + 1, range.end);
    ranges.push({ start: index, end });
    index = end - 1;
  }
  return ranges;
}

/**
 * The index of the last real user message (where the current turn starts), or
 * -1 when there is none.
 */
export function taskAnchorIndex(messages: readonly ChatMessage[]): number {
  for (let index = messages.length - 1; index >= 0; index--) {
    if (isRealUserMessage(messages[index]!)) return index;
  }
  return -1;
}

/** The first index at or after `from` (and before `end`) that is not a tool message. */
function firstNonToolIndex(messages: readonly ChatMessage[], from: number, end = messages.length): number {
  let index = from;
  while (index < end && messages[index]!.role === 'tool') index++;
  return index;
}

/**
 * Moves a cut forward past any tool results standing right after it, so the
 * old part keeps each call together with its results. The index form of
 * `balanceToolCallBoundary`; every cut compaction makes goes through it.
 */
export function balanceCut(messages: readonly ChatMessage[], cut: number): number {
  return firstNonToolIndex(messages, cut);
}

/**
 * Moves the leading `tool` messages of `recent` to the end of `old`, so that a
 * call and its results are never split across the two parts. Pure: returns new
 * arrays, never the inputs.
 *
 * @example
 * balanceToolCallBoundary([assistantWithCallC1], [toolC1, user]) // → [[assistantWithCallC1, toolC1], [user]]
 */
export function balanceToolCallBoundary(
  old: readonly ChatMessage[],
  recent: readonly ChatMessage[],
): [ChatMessage[], ChatMessage[]] {
  const moved = firstNonToolIndex(recent, 0);
  return [[...old, ...recent.slice(0, moved)], recent.slice(moved)];
}

/**
 * The head and the turns as arrays of messages (the same message objects).
 *
 * @example
 * splitTurns([system, user1, assistant1, user2]) // → { head: [system], turns: [[user1, assistant1], [user2]] }
 */
export function splitTurns(messages: readonly ChatMessage[]): { head: ChatMessage[]; turns: ChatMessage[][] } {
  const head = messages.slice(0, headLength(messages));
  const turns = turnRanges(messages).map(({ start, end }) => messages.slice(start, end));
  return { head, turns };
}
