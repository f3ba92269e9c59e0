import type { ChatMessage } from '../../transcript/message.js';
import { contentText } from '../../transcript/message.js';
import type { ChatCall, SummarySlot } from '../ports.js';

/** Reading the notes out of a summary answer. */

/**
 * The notes in a chat completion, or null when it has none: no text, only a
 * tool call, or only reasoning. The `<think>` block some models leave at the
 * start of the content is not notes.
 */
export function notesOf(response: unknown): string | null {
  if (typeof response !== 'object' || response === null) return null;
  const choices = (response as { choices?: unknown }).choices;
  if (!Array.isArray(choices)) return null;
  const message = (choices[0] as { message?: ChatMessage } | undefined)?.message;
  if (message === undefined || message === null || typeof message !== 'object') return null;
  if (Array.isArray(message.tool_calls) && message.tool_calls.length > 0) return null;
  const text = withoutReasoning(contentText(message.content)).trim();
  return text === '' ? null : text;
}

const OPEN = '<think>';
const CLOSE = '</think>';

/**
 * The answer without the reasoning it starts with. Only a leading block is
 * reasoning: notes may mention `<think>` (a summary of work on a chat
 * template), and everything after such a mention is notes.
 */
function withoutReasoning(text: string): string {
  const start = text.trimStart();
  if (start.startsWith(OPEN)) {
    const close = start.indexOf(CLOSE);
    // max_tokens reached while thinking: there are no notes yet.
    return close === -1 ? '' : start.slice(close + CLOSE.length);
  }
  // A block the template opened in the prompt (R1-style templates with `reasoning_format: none`)
  // shows only its end: reasoning up to the first closing tag, when no opening tag comes before it.
  const close = text.indexOf(CLOSE);
  if (close !== -1 && !text.slice(0, close).includes(OPEN)) return text.slice(close + CLOSE.length);
  return text;
}

/** Makes one summary call and returns its notes; throws when the answer has none. */
export async function callForNotes(call: ChatCall, body: Record<string, unknown>, signal: AbortSignal, slot?: SummarySlot): Promise<string> {
  const notes = notesOf(await call(body, signal, undefined, slot));
  if (notes === null) throw new Error('the summary answer had no text (empty, reasoning only, or a tool call)');
  return notes;
}
