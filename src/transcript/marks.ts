import { type ChatMessage, contentText } from './message.js';

/**
 * Marks: every message compactor writes starts with `[compacted:<strategy>] `,
 * so a later pass can tell our text from the user's. A marked user message
 * never anchors a task and is never summarized as if a user had said it.
 */
export type MarkStrategy = 'summary' | 'steps' | 'truncated' | 'missing';

const MARK_PREFIX = '[compacted:';

/**
 * @example
 * mark('summary', 'notes') // → '[compacted:summary] notes'
 */
export function mark(strategy: MarkStrategy, text: string): string {
  return `${MARK_PREFIX}${strategy}] ${text}`;
}

const SUMMARY_ACKNOWLEDGEMENT = 'Understood; continuing from these notes.';

/**
 * What replaces old turns: a user message with the notes and the assistant's
 * acknowledgement, keeping alternation (the summary tier's, and a Messages
 * request read from a `compaction` block).
 */
export function summaryPair(notes: string): ChatMessage[] {
  return [
    { role: 'user', content: mark('summary', notes) },
    { role: 'assistant', content: mark('summary', SUMMARY_ACKNOWLEDGEMENT) },
  ];
}

/**
 * Whether a message's content (a string, or the first text part) starts with a
 * mark, of any strategy or of the one given.
 *
 * @example
 * isMarked({ role: 'user', content: '[compacted:summary] notes' }, 'summary') // → true
 */
export function isMarked(message: ChatMessage, strategy?: MarkStrategy): boolean {
  const text = contentText(message.content);
  if (!text.startsWith(MARK_PREFIX)) return false;
  return strategy === undefined || text.startsWith(`${MARK_PREFIX}${strategy}]`);
}
