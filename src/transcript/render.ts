import { type ChatMessage, type ContentPart } from './message.js';

/**
 * Plain-text rendering of a transcript, for prepend-mode summaries: the old
 * part is sent to the summarizer as text, never replayed as messages, so no
 * half of a call/result pair can reach the wire and no role header can be
 * mistaken for the summarizer's own conversation.
 */

/** A placeholder for a content part that is not text: the summarizer sees that something was there. */
function partPlaceholder(type: string): string {
  if (type === 'image_url' || type === 'image') return '[image]';
  if (type === 'input_audio' || type === 'audio') return '[audio]';
  return `[${type}]`;
}

function renderPart(part: ContentPart): string {
  // Any part carrying a string `text` is text (OpenAI's `text`, the Responses API's `input_text`…).
  const text = part['text'];
  return typeof text === 'string' ? text : partPlaceholder(part.type);
}

function renderContent(content: ChatMessage['content']): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map(renderPart).join('\n');
}

function line(label: string, body: string): string {
  return body === '' ? `[${label}]` : `[${label}] ${body}`;
}

/** One message: its content on the line of its role, then one line per call it makes. */
function renderMessage(message: ChatMessage): string {
  const { role } = message;
  const label = role === 'tool' && typeof message.tool_call_id === 'string' ? `tool #${message.tool_call_id}` : role;
  const calls = Array.isArray(message.tool_calls) ? message.tool_calls : [];
  const text = renderContent(message.content);
  const lines: string[] = [];
  // A message that only makes calls is shown by its calls alone: an empty "[assistant]" line says nothing.
  if (text !== '' || calls.length === 0) lines.push(line(label, text));
  for (const call of calls) {
    lines.push(line(`${role} → call ${call.function.name} #${call.id}`, call.function.arguments ?? ''));
  }
  return lines.join('\n');
}

/**
 * Renders messages as plain text, one block per message, blocks separated by
 * a blank line: `[user] …`, `[assistant] …`, one `[assistant → call NAME #ID] ARGUMENTS`
 * line per call, `[tool #ID] …` for a result, `[image]` / `[audio]` / `[TYPE]`
 * for non-text content parts, and unknown roles under their own name.
 * Content is copied verbatim, with its own newlines.
 *
 * Guarantees: deterministic (the same messages give the same text); every
 * message gives exactly one block, in order; the input is not mutated.
 *
 * @example
 * renderTranscript([
 *   { role: 'user', content: 'list files' },
 *   { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'bash', arguments: '{"cmd":"ls"}' } }] },
 *   { role: 'tool', tool_call_id: 'c1', content: 'a.txt' },
 * ])
 * // → '[user] list files\n\n[assistant → call bash #c1] {"cmd":"ls"}\n\n[tool #c1] a.txt'
 */
export function renderTranscript(messages: readonly ChatMessage[]): string {
  return messages.map(renderMessage).join('\n\n');
}
