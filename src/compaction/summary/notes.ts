import type { ChatMessage } from '../../transcript/message.js';
import { contentText } from '../../transcript/message.js';
import type { ChatCall } from './summarize.js';

/** Reading the notes out of a summary answer. */

/**
 * The notes in a chat completion, or null when it has none: no text, only a
 * tool call, or only reasoning. `<think>` blocks some models leave in the
 * content are not notes.
 */
export function notesOf(response: unknown): string | null {
  if (typeof response !== 'object' || response === null) return null;
  const choices = (response as { choices?: unknown }).choices;
  if (!Array.isArray(choices)) return null;
  const message = (choices[0] as { message?: ChatMessage } | undefined)?.message;
  if (message === undefined || message === null || typeof message !== 'object') return null;
  if (Array.isArray(message.tool_calls) && message.tool_calls.length > 0) return null;
  const text = contentText(message.content)
    .replace(/<think>[\s\S]*?<\/think>/g, '')
    // A block the template opened in the prompt (R1-style templates with `reasoning_format: none`) shows only its end…
    .replace(/^[\s\S]*<\/think>/, '')
    // …and one that max_tokens cut off shows only its start: reasoning, not notes.
    .replace(/<think>[\s\S]*$/, '')
    .trim();
  return text === '' ? null : text;
}

/** Makes one summary call and returns its notes; throws when the answer has none. */
export async function callForNotes(call: ChatCall, body: Record<string, unknown>, signal: AbortSignal): Promise<string> {
  const notes = notesOf(await call(body, signal));
  if (notes === null) throw new Error('the summary answer had no text (empty, reasoning only, or a tool call)');
  return notes;
}
