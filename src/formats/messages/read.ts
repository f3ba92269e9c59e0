import { InvalidRequestError } from '../../errors.js';
import type { ChatMessage, ContentPart } from '../../transcript/message.js';
import { summaryPair } from '../../transcript/marks.js';
import { runNow, sliceEndsAt, type Slices } from '../../transcript/slices.js';
import { isRecord, isUnchanged, originOf, tag } from '../origin.js';

/**
 * The Anthropic Messages API (`POST /v1/messages`, what Claude Code speaks)
 * as the transcript core sees it, and back. The view is a chat completion:
 * top-level `system` is the head (a system message), a user message's
 * `tool_result` blocks become `tool` messages (before the rest of it, as
 * llama-server converts them), an assistant's `tool_use` blocks its
 * `tool_calls`, `thinking` its `reasoning_content`, and `tools` the chat
 * form of the same tools (so a summary asked through chat completions
 * renders the same prefix). Back, a wire message whose view the core left
 * alone goes as the client's own bytes; one it changed is rebuilt from its
 * own blocks (thinking and redacted thinking kept verbatim with their
 * signatures, `cache_control` kept on every block that stays); the core's
 * own messages (a summary pair, a missing result) are written afresh.
 */

export type WireMessage = Record<string, unknown>;

export interface MessagesView {
  /** A chat completion body: model, the head and the turns as chat messages, and the tools in chat form. */
  readonly chat: { model: string; messages: ChatMessage[]; tools?: unknown[] };
  readonly stream: boolean;
  /** The client's messages. */
  readonly wire: readonly WireMessage[];
  /** How many chat messages each wire message became. */
  readonly made: readonly number[];
  /** The index of the first chat message after the head (the system message, when there is one). */
  readonly headLength: number;
  /** Set when the view is not the client's list as it came (read from a compaction block, a block only Anthropic knows left out). */
  readonly rewritten?: boolean;
}

function invalid(param: string, message: string): InvalidRequestError {
  return new InvalidRequestError({ code: 'invalid_body', message: `${param}: ${message}`, param });
}

/** Checks what the view reads (loosely: unknown fields and block types pass) and throws a 400 naming the first problem. */
export function checkMessagesBody(body: Record<string, unknown>): asserts body is { model: string; messages: WireMessage[] } {
  if (typeof body['model'] !== 'string') throw invalid('model', body['model'] === undefined ? 'is required' : 'must be a string');
  const messages = body['messages'];
  if (!Array.isArray(messages)) throw invalid('messages', messages === undefined ? 'is required' : 'must be an array');
  if (messages.length === 0) throw invalid('messages', 'must not be empty');
  for (const [index, message] of messages.entries()) {
    const param = `messages[${index}]`;
    if (!isRecord(message)) throw invalid(param, 'must be an object');
    if (message['role'] !== 'user' && message['role'] !== 'assistant') throw invalid(`${param}.role`, 'must be "user" or "assistant"');
    const content = message['content'];
    if (typeof content === 'string') continue;
    if (!Array.isArray(content)) throw invalid(`${param}.content`, 'must be a string or an array of content blocks');
    for (const [position, block] of content.entries()) {
      if (!isRecord(block) || typeof block['type'] !== 'string') throw invalid(`${param}.content[${position}]`, 'must be a content block with a string "type"');
    }
  }
  const system = body['system'];
  if (system !== undefined && typeof system !== 'string' && !Array.isArray(system)) throw invalid('system', 'must be a string or an array of text blocks');
}

export function blocksOf(message: WireMessage): Record<string, unknown>[] {
  const content = message['content'];
  return Array.isArray(content) ? (content as Record<string, unknown>[]) : [];
}

export function textOfBlocks(blocks: readonly unknown[]): string {
  return blocks
    .filter((block): block is Record<string, unknown> => isRecord(block) && block['type'] === 'text' && typeof block['text'] === 'string')
    .map((block) => block['text'] as string)
    .join('\n');
}

/** A tool result's content as text: a string as is, its text blocks joined. */
function resultText(block: Record<string, unknown>): string {
  const content = block['content'];
  if (typeof content === 'string') return content;
  return Array.isArray(content) ? textOfBlocks(content) : '';
}

/** A user block as a chat content part: text as text, an image as an `image_url` (what llama-server makes of it). */
function partOf(block: Record<string, unknown>): ContentPart {
  if (block['type'] === 'image' && isRecord(block['source'])) {
    const source = block['source'];
    const url = source['type'] === 'base64' ? `data:${String(source['media_type'])};base64,${String(source['data'])}` : String(source['url'] ?? '');
    return { type: 'image_url', image_url: { url } };
  }
  if (block['type'] === 'text') return { type: 'text', text: typeof block['text'] === 'string' ? block['text'] : '' };
  // Documents and other blocks are kept as they are: counted as media, never rewritten.
  return { ...block, type: String(block['type']) };
}

function* userView(message: WireMessage, index: number): Slices<ChatMessage[]> {
  const content = message['content'];
  if (typeof content === 'string') return [tag({ role: 'user', content }, index)];
  const blocks = blocksOf(message);
  const views: ChatMessage[] = [];
  for (const [position, block] of blocks.entries()) {
    // One turn may hold tens of thousands of results: a large body's view is made a slice at a time.
    if (sliceEndsAt(position)) yield;
    if (block['type'] !== 'tool_result') continue;
    // Tagged with its block: a turn may repeat a tool_use_id, and each result is written back from its own block.
    // `is_error` rides on the view: a failed result never supersedes a good one (transcript/compress/result-outcome.ts).
    const failed = block['is_error'] === true ? { is_error: true } : {};
    views.push(tag({ role: 'tool', tool_call_id: String(block['tool_use_id'] ?? ''), content: resultText(block), ...failed }, index, position));
  }
  const rest = blocks.filter((block) => block['type'] !== 'tool_result');
  if (rest.length > 0 || views.length === 0) views.push(tag({ role: 'user', content: rest.map(partOf) }, index));
  return views;
}

function assistantView(message: WireMessage, index: number): ChatMessage {
  const content = message['content'];
  if (typeof content === 'string') return tag({ role: 'assistant', content }, index);
  const blocks = blocksOf(message);
  const calls = blocks
    .filter((block) => block['type'] === 'tool_use')
    .map((block) => ({ id: String(block['id'] ?? ''), type: 'function', function: { name: String(block['name'] ?? ''), arguments: JSON.stringify(block['input'] ?? {}) } }));
  const thinking = blocks
    .filter((block) => block['type'] === 'thinking' && typeof block['thinking'] === 'string')
    .map((block) => block['thinking'] as string)
    .join('\n');
  const view: ChatMessage = { role: 'assistant', content: textOfBlocks(blocks) };
  if (calls.length > 0) view.tool_calls = calls;
  if (thinking !== '') view['reasoning_content'] = thinking;
  return tag(view, index);
}

/** The tools in chat form; server tools (`web_search_…`, with a `type` and no schema) have no chat form and are left out. */
function chatTools(tools: unknown): unknown[] | undefined {
  if (!Array.isArray(tools)) return undefined;
  const converted = tools
    .filter((tool): tool is Record<string, unknown> => isRecord(tool) && typeof tool['name'] === 'string' && tool['input_schema'] !== undefined)
    .map((tool) => ({ type: 'function', function: { name: tool['name'], ...(tool['description'] === undefined ? {} : { description: tool['description'] }), parameters: tool['input_schema'] } }));
  return converted.length > 0 ? converted : undefined;
}

/** The transcript view of a checked Messages body. */
export function messagesView(body: CheckedBody): MessagesView {
  return runNow(messagesViewSteps(body));
}

type CheckedBody = { model: string; messages: WireMessage[] } & Record<string, unknown>;

/** A `compaction` block's notes (Anthropic's compact_20260112); undefined for any other block, or a failed compaction's (null content). */
function compactionNotes(block: Record<string, unknown>): string | undefined {
  return block['type'] === 'compaction' && typeof block['content'] === 'string' && block['content'] !== '' ? block['content'] : undefined;
}

/** The index of the last assistant message that carries a compaction's notes, or -1. */
function lastCompaction(messages: readonly WireMessage[]): number {
  for (let index = messages.length - 1; index >= 0; index--) {
    if (messages[index]!['role'] === 'assistant' && blocksOf(messages[index]!).some((block) => compactionNotes(block) !== undefined)) return index;
  }
  return -1;
}

/**
 * The assistant message that carries a compaction, read from its block on
 * (Anthropic: "the API drops all message blocks prior to the compaction
 * block"): the notes as a summary pair's user message, then the rest of the
 * message in the pair's assistant place (a new object, so the write-back
 * rebuilds it without the block), or the pair's own acknowledgement when
 * nothing follows the block.
 */
function compactionView(message: WireMessage, index: number): ChatMessage[] {
  const blocks = blocksOf(message);
  const at = blocks.findLastIndex((block) => compactionNotes(block) !== undefined);
  const [notes, acknowledgement] = summaryPair(compactionNotes(blocks[at]!)!);
  const rest = blocks.slice(at + 1).filter((block) => block['type'] !== 'compaction');
  if (rest.length === 0) return [notes!, acknowledgement!];
  return [notes!, { ...assistantView({ ...message, content: rest }, index) }];
}

/** An assistant message's view; one holding a compaction block (a failed one: null content) is a new object, so the write-back rebuilds it without the block. */
function assistantOf(message: WireMessage, index: number): ChatMessage {
  const view = assistantView(message, index);
  return blocksOf(message).some((block) => block['type'] === 'compaction') ? { ...view } : view;
}

/** {@link messagesView} as steps: yields after each slice of messages and of a turn's blocks (steps.ts). */
export function* messagesViewSteps(body: CheckedBody): Slices<MessagesView> {
  const messages: ChatMessage[] = [];
  const system = body['system'];
  const systemText = typeof system === 'string' ? system : Array.isArray(system) ? textOfBlocks(system) : '';
  if (systemText !== '') messages.push({ role: 'system', content: systemText });
  const headLength = messages.length;
  const made: number[] = [];
  // A request carrying a compaction block is read from it on; what came before it is not forwarded.
  const compaction = lastCompaction(body.messages);
  for (const [index, message] of body.messages.entries()) {
    if (sliceEndsAt(index)) yield;
    if (index < compaction) {
      made.push(0);
      continue;
    }
    const views = index === compaction ? compactionView(message, index) : message['role'] === 'user' ? yield* userView(message, index) : [assistantOf(message, index)];
    made.push(views.filter((view) => originOf(view) !== undefined).length);
    for (const view of views) messages.push(view);
  }
  const tools = chatTools(body['tools']);
  const chat = tools === undefined ? { model: body.model, messages } : { model: body.model, messages, tools };
  const rewritten = compaction >= 0 || messages.some((view) => view.role === 'assistant' && !isUnchanged(view) && originOf(view) !== undefined);
  return { chat, stream: body['stream'] === true, wire: body.messages, made, headLength, ...(rewritten ? { rewritten } : {}) };
}

/** The wire index of the chat message at `index` of the view (for errors naming a message), or undefined for the head. */
export function wireIndexOf(chat: readonly ChatMessage[], index: number): number | undefined {
  const message = chat[index];
  return message === undefined ? undefined : originOf(message)?.index;
}
