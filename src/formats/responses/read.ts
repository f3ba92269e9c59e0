import { InvalidRequestError } from '../../errors.js';
import type { ChatMessage, ToolCall } from '../../transcript/message.js';
import { isRecord, originOf, tag } from '../origin.js';

/**
 * The OpenAI Responses API (`POST /v1/responses`, the only API Codex CLI
 * speaks) as the transcript core sees it, and back. `instructions` is the
 * head; `input` (a string, or items) becomes chat messages: a `message` item
 * one message (`developer` and `system` ones as system messages), a run of
 * `reasoning` / assistant `message` / `function_call` items one assistant
 * message with its `tool_calls` (so parallel calls pair as in chat), a
 * `function_call_output` a tool message paired by `call_id`. Back, items
 * whose view came back untouched are the client's objects; a changed group
 * is rebuilt from its own items (`reasoning` with its `encrypted_content`
 * kept verbatim, calls kept while still made). A request that keeps its
 * state on the server (`previous_response_id`, `conversation`) or carries
 * items compactor cannot read is not compacted: it goes as it came.
 */

export type WireItem = Record<string, unknown>;

export interface ResponsesView {
  readonly chat: { model: string; messages: ChatMessage[]; tools?: unknown[] };
  readonly stream: boolean;
  /** Why the request goes upstream untouched, or undefined. */
  readonly untouched: string | undefined;
  readonly items: readonly WireItem[];
  /** For the first item of each group: how many items the group spans and how many chat messages it became. */
  readonly spans: ReadonlyMap<number, { readonly items: number; readonly made: number }>;
  readonly headLength: number;
}

function invalid(param: string, message: string): InvalidRequestError {
  return new InvalidRequestError({ code: 'invalid_body', message: `${param}: ${message}`, param });
}

export function checkResponsesBody(body: Record<string, unknown>): asserts body is { model: string } {
  if (typeof body['model'] !== 'string') throw invalid('model', body['model'] === undefined ? 'is required' : 'must be a string');
  const input = body['input'];
  if (input === undefined || typeof input === 'string') return;
  if (!Array.isArray(input)) throw invalid('input', 'must be a string or an array of items');
  for (const [index, item] of input.entries()) if (!isRecord(item)) throw invalid(`input[${index}]`, 'must be an object');
  const instructions = body['instructions'];
  if (instructions !== undefined && instructions !== null && typeof instructions !== 'string') throw invalid('instructions', 'must be a string');
}

export function kindOf(item: WireItem): string {
  if (typeof item['type'] === 'string') return item['type'];
  return typeof item['role'] === 'string' ? 'message' : '';
}

const KNOWN_KINDS = new Set(['message', 'function_call', 'function_call_output', 'reasoning']);

/** A message item's text: a string as is, its text parts joined. */
function itemText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter((part): part is Record<string, unknown> => isRecord(part) && typeof part['text'] === 'string')
    .map((part) => part['text'] as string)
    .join('\n');
}

function chatTools(tools: unknown): unknown[] | undefined {
  if (!Array.isArray(tools)) return undefined;
  const converted = tools
    .filter((tool): tool is Record<string, unknown> => isRecord(tool) && tool['type'] === 'function' && typeof tool['name'] === 'string')
    .map((tool) => ({ type: 'function', function: { name: tool['name'], ...(tool['description'] == null ? {} : { description: tool['description'] }), parameters: tool['parameters'] ?? {} } }));
  return converted.length > 0 ? converted : undefined;
}

function untouchedReason(body: Record<string, unknown>, items: readonly WireItem[]): string | undefined {
  if (body['previous_response_id'] != null) return 'passed through: previous_response_id (the server keeps the state)';
  if (body['conversation'] != null) return 'passed through: conversation (the server keeps the state)';
  const unknown = items.find((item) => !KNOWN_KINDS.has(kindOf(item)));
  return unknown === undefined ? undefined : `passed through: input item "${kindOf(unknown) || 'untyped'}" is not compacted`;
}

/** The transcript view of a checked Responses body. */
export function responsesView(body: { model: string } & Record<string, unknown>): ResponsesView {
  const input = body['input'];
  const items: WireItem[] = typeof input === 'string' ? [{ role: 'user', content: input }] : Array.isArray(input) ? (input as WireItem[]) : [];
  const messages: ChatMessage[] = [];
  const instructions = body['instructions'];
  if (typeof instructions === 'string' && instructions !== '') messages.push({ role: 'system', content: instructions });
  const headLength = messages.length;
  const spans = new Map<number, { items: number; made: number }>();
  const untouched = untouchedReason(body, items);
  let index = 0;
  while (untouched === undefined && index < items.length) {
    const item = items[index]!;
    const kind = kindOf(item);
    const role = item['role'];
    if (kind === 'function_call_output') {
      messages.push(tag({ role: 'tool', tool_call_id: String(item['call_id'] ?? ''), content: itemText(item['output']) }, index));
      spans.set(index, { items: 1, made: 1 });
      index++;
      continue;
    }
    if (kind === 'message' && role !== 'assistant') {
      const chatRole = role === 'developer' ? 'system' : String(role);
      messages.push(tag({ role: chatRole, content: itemText(item['content']) }, index));
      spans.set(index, { items: 1, made: 1 });
      index++;
      continue;
    }
    // An assistant turn: reasoning, its message and its calls, up to the next item of another kind.
    const start = index;
    const calls: ToolCall[] = [];
    const texts: string[] = [];
    while (index < items.length) {
      const next = items[index]!;
      const nextKind = kindOf(next);
      if (nextKind === 'reasoning') {
        // Reasoning opens a turn: it does not follow that turn's calls.
        if (calls.length > 0) break;
      } else if (nextKind === 'message' && next['role'] === 'assistant') {
        if (calls.length > 0) break;
        texts.push(itemText(next['content']));
      } else if (nextKind === 'function_call') {
        calls.push({ id: String(next['call_id'] ?? ''), type: 'function', function: { name: String(next['name'] ?? ''), arguments: typeof next['arguments'] === 'string' ? next['arguments'] : '' } });
      } else break;
      index++;
    }
    const view: ChatMessage = { role: 'assistant', content: texts.join('\n') };
    if (calls.length > 0) view.tool_calls = calls;
    messages.push(tag(view, start));
    spans.set(start, { items: index - start, made: 1 });
  }
  const tools = chatTools(body['tools']);
  const chat = tools === undefined ? { model: body.model, messages } : { model: body.model, messages, tools };
  return { chat, stream: body['stream'] === true, untouched, items, spans, headLength };
}

/** The `input` index of the chat message at `index` of the view (for errors naming an item). */
export function inputIndexOf(chat: readonly ChatMessage[], index: number): number | undefined {
  const message = chat[index];
  return message === undefined ? undefined : originOf(message)?.index;
}
