import { type ChatMessage, contentText } from '../../transcript/message.js';
import { isUnchanged, originOf } from '../origin.js';
import type { ParsedAhead } from '../parse-ahead.js';
import { findMessagesSpan, type ListEntry, listParts, spliceList } from '../splice.js';
import { type MessagesView, type WireMessage, blocksOf } from './read.js';

/**
 * A Messages body written back from the chat messages the core returned: a
 * wire message whose view the core left alone goes as the client's own bytes;
 * one it changed is rebuilt from its own blocks (thinking and redacted
 * thinking kept verbatim with their signatures, `cache_control` kept on every
 * block that stays); the core's own messages (a summary pair, a missing
 * result) are written afresh.
 */

/** A chat message of the core's own, in Messages form. */
function freshMessage(message: ChatMessage): WireMessage | undefined {
  const text = contentText(message.content);
  if (message.role === 'tool') return { role: 'user', content: [{ type: 'tool_result', tool_use_id: message.tool_call_id ?? '', content: text }] };
  if (message.role === 'user' || message.role === 'assistant') return { role: message.role, content: text };
  return undefined;
}

/** A user message the core changed, rebuilt from its own blocks. */
function rebuiltUser(original: WireMessage, views: readonly ChatMessage[]): WireMessage | undefined {
  const blocks = blocksOf(original);
  const out: unknown[] = [];
  for (const view of views) {
    if (view.role === 'tool') {
      const position = originOf(view)?.block;
      const block = position === undefined ? undefined : blocks[position];
      if (block === undefined) continue;
      out.push(isUnchanged(view) ? block : { ...block, content: contentText(view.content) });
      continue;
    }
    if (typeof original['content'] === 'string') return { ...original, content: contentText(view.content) };
    const made = originOf(view)?.made.content;
    const rest = blocks.filter((block) => block['type'] !== 'tool_result');
    // Each part's place among the blocks, found once: `made.indexOf` per part was quadratic in the parts.
    const positionOf = new Map(Array.isArray(made) ? made.map((part, position) => [part, position] as const) : []);
    const parts = Array.isArray(view.content) ? view.content : [{ type: 'text', text: view.content ?? '' }];
    for (const part of parts) {
      const position = positionOf.get(part);
      out.push(position !== undefined ? rest[position] : { type: 'text', text: typeof part['text'] === 'string' ? part['text'] : '' });
    }
  }
  return out.length > 0 ? { ...original, content: out } : undefined;
}

/** A call's input as the core left it: the client's block when its arguments are as they were, else its input rewritten (a cleared input). */
function callBlock(block: Record<string, unknown>, args: string | undefined): Record<string, unknown> {
  if (args === undefined || args === JSON.stringify(block['input'] ?? {})) return block;
  try {
    return { ...block, input: JSON.parse(args) as unknown };
  } catch {
    return block;
  }
}

/**
 * An assistant message the core changed: thinking kept as it was (or left
 * out, when its thinking was cleared: `clear_thinking`), text replaced, only
 * the calls still made, each with its input as the core left it.
 */
function rebuiltAssistant(original: WireMessage, view: ChatMessage): WireMessage {
  const text = contentText(view.content);
  if (typeof original['content'] === 'string') return { ...original, content: text };
  const calls = new Map((view.tool_calls ?? []).map((call) => [call.id, call.function?.arguments] as const));
  const made = originOf(view)?.made;
  const textChanged = text !== contentText(made?.content ?? null);
  const thinkingCleared = made !== undefined && made['reasoning_content'] !== undefined && view['reasoning_content'] === undefined;
  const out: unknown[] = [];
  let textPlaced = !textChanged;
  for (const block of blocksOf(original)) {
    if (block['type'] === 'compaction') continue;
    if (thinkingCleared && (block['type'] === 'thinking' || block['type'] === 'redacted_thinking')) continue;
    if (block['type'] === 'tool_use') {
      if (!textPlaced && text !== '') out.push({ type: 'text', text });
      textPlaced = true;
      const id = String(block['id']);
      if (calls.has(id)) out.push(callBlock(block, calls.get(id)));
    } else if (block['type'] === 'text' && textChanged) {
      if (!textPlaced && text !== '') out.push({ ...block, text });
      textPlaced = true;
    } else out.push(block);
  }
  if (!textPlaced && text !== '') out.push({ type: 'text', text });
  return { ...original, content: out };
}

/**
 * The Messages list for the chat messages the core returned: the client's
 * own message (by its index) wherever its view came back untouched and whole.
 */
export function messagesFromView(view: MessagesView, chat: readonly ChatMessage[]): ListEntry[] {
  const out: ListEntry[] = [];
  let position = view.headLength;
  while (position < chat.length) {
    const first = chat[position]!;
    const origin = originOf(first);
    if (origin === undefined) {
      const fresh = freshMessage(first);
      if (fresh !== undefined) out.push({ value: fresh });
      position++;
      continue;
    }
    const run: ChatMessage[] = [first];
    while (position + run.length < chat.length && originOf(chat[position + run.length]!)?.index === origin.index) run.push(chat[position + run.length]!);
    position += run.length;
    const original = view.wire[origin.index]!;
    if (run.length === view.made[origin.index] && run.every(isUnchanged)) out.push({ kept: origin.index });
    else if (original['role'] === 'assistant') out.push({ value: rebuiltAssistant(original, run[0]!) });
    else {
      const rebuilt = rebuiltUser(original, run);
      if (rebuilt !== undefined) out.push({ value: rebuilt });
    }
  }
  return out;
}

/**
 * The client's bytes with `messages` rewritten from the chat messages the
 * core returned: a kept message spliced as it came. For a large body parsed
 * ahead (parse-ahead.ts), a kept message is copied from where the parse found
 * it, and a rebuilt turn is written with each block it kept as the client's
 * own bytes: a 30 MiB turn that lost one orphan result is copied, not
 * serialized again (issue 21). As parts, in order: the caller joins them, a
 * large body a MiB per turn of the loop (issue 34).
 */
export function messagesPartsFor(raw: Buffer, view: MessagesView, chat: readonly ChatMessage[], parsedAhead: ParsedAhead | undefined): readonly Buffer[] {
  const entries = messagesFromView(view, chat);
  if (parsedAhead?.list === undefined || parsedAhead.raw !== raw) return [spliceList(raw, 'messages', entries)];
  return listParts(raw, parsedAhead.list, entries.map((entry) => {
    if (!('kept' in entry)) return messageParts(entry.value as WireMessage, raw, parsedAhead);
    const original = view.wire[entry.kept]!;
    return parsedAhead.bytesOf(original, raw) ?? Buffer.from(JSON.stringify(original));
  }));
}

const CONTENT_KEY = Buffer.from('"content"');

/**
 * A rebuilt message as the parts of its bytes: serialized with an empty
 * `content`, its blocks put in, each kept one as the client's bytes (as
 * parts: the body's one join copies the blocks once).
 */
function messageParts(message: WireMessage, raw: Buffer, parsedAhead: ParsedAhead): Buffer[] {
  const content = message['content'];
  const bytesOf = (block: unknown): Buffer | undefined => (typeof block === 'object' && block !== null ? parsedAhead.bytesOf(block, raw) : undefined);
  if (!Array.isArray(content) || !content.some((block) => bytesOf(block) !== undefined)) return [Buffer.from(JSON.stringify(message))];
  const outer = Buffer.from(JSON.stringify({ ...message, content: [] }));
  const span = findMessagesSpan(outer, CONTENT_KEY)!;
  return listParts(outer, span, content.map((block: unknown) => bytesOf(block) ?? Buffer.from(JSON.stringify(block))));
}
