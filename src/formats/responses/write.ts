import { type ChatMessage, contentText } from '../../transcript/message.js';
import { isUnchanged, originOf } from '../origin.js';
import { spliceValue } from '../splice.js';
import { type ResponsesView, type WireItem, kindOf } from './read.js';

/**
 * A Responses body written back: items whose view came back untouched are
 * the client's objects; a changed group is rebuilt from its own items
 * (`reasoning` with its `encrypted_content` kept verbatim, calls kept while
 * still made); the core's own messages are written afresh as items.
 */

/** A chat message compactor wrote, as a Responses input item (the system role has none: the head is `instructions`). */
export function freshItem(message: ChatMessage): WireItem | undefined {
  const text = contentText(message.content);
  if (message.role === 'tool') return { type: 'function_call_output', call_id: message.tool_call_id ?? '', output: text };
  if (message.role === 'user') return { type: 'message', role: 'user', content: [{ type: 'input_text', text }] };
  if (message.role === 'assistant') return { type: 'message', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] };
  return undefined;
}

/** A changed group, rebuilt from its own items. */
function rebuilt(items: readonly WireItem[], view: ChatMessage): WireItem[] {
  const first = items[0]!;
  const text = contentText(view.content);
  if (view.role === 'tool') return [{ ...first, output: text }];
  if (view.role !== 'assistant') {
    const textPart = first['role'] === 'assistant' ? 'output_text' : 'input_text';
    return [{ ...first, content: typeof first['content'] === 'string' ? text : [{ type: textPart, text }] }];
  }
  const calls = new Set((view.tool_calls ?? []).map((call) => call.id));
  const textChanged = text !== contentText(originOf(view)?.made.content ?? null);
  const out: WireItem[] = [];
  let textPlaced = !textChanged;
  const placeText = (template: WireItem | undefined): void => {
    if (!textPlaced && text !== '') out.push({ ...(template ?? { type: 'message', role: 'assistant' }), content: [{ type: 'output_text', text, annotations: [] }] });
    textPlaced = true;
  };
  for (const item of items) {
    const kind = kindOf(item);
    if (kind === 'function_call') {
      placeText(undefined);
      if (calls.has(String(item['call_id']))) out.push(item);
    } else if (kind === 'message' && textChanged) placeText(item);
    else out.push(item);
  }
  placeText(undefined);
  return out;
}

/** The `input` items for the chat messages the core returned. */
export function itemsFromView(view: ResponsesView, chat: readonly ChatMessage[]): WireItem[] {
  const out: WireItem[] = [];
  for (const message of chat.slice(view.headLength)) {
    const origin = originOf(message);
    const span = origin === undefined ? undefined : view.spans.get(origin.index);
    if (origin === undefined || span === undefined) {
      const fresh = freshItem(message);
      if (fresh !== undefined) out.push(fresh);
      continue;
    }
    const items = view.items.slice(origin.index, origin.index + span.items);
    if (isUnchanged(message)) out.push(...items);
    else out.push(...rebuilt(items, message));
  }
  return out;
}


/** The client's bytes with `input` rewritten from the chat messages the core returned. */
export function responsesBytesFor(raw: Buffer, view: ResponsesView, chat: readonly ChatMessage[]): Buffer {
  return spliceValue(raw, 'input', Buffer.from(JSON.stringify(itemsFromView(view, chat))));
}
