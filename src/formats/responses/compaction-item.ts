import { type ChatMessage, contentText } from '../../transcript/message.js';
import { readJsonObject } from '../json-body.js';
import { isRecord } from '../origin.js';
import { spliceList, type ListEntry } from '../splice.js';
import type { CarriedOpener } from '../wire-format.js';
import { type WireItem, kindOf } from './read.js';
import { freshItem } from './write.js';

/**
 * The Responses API's `compaction` item, as compactor serves it for a local
 * server (issue 38 item 1). `POST /v1/responses/compact` answers a
 * `response.compaction` object whose `output` is every user message of the
 * input followed by one `compaction` item (OpenAI: "a list of all user
 * messages, followed by a single compaction item"; openai-node's
 * `CompactedResponse`); its `encrypted_content` is compactor's sealed token.
 * A later `/v1/responses` body carrying the item is rewritten before its
 * read: the item replaced by the chat messages it stands for (the summary
 * pair), as fresh items, every other item's bytes as the client sent them,
 * so the same item always reaches the upstream as the same bytes.
 */

export const COMPACTION_KIND = 'compaction';

/**
 * The input item that asks a `/v1/responses` request for a compaction
 * instead of an answer (openai-node `ResponseInputItem.CompactionTrigger`:
 * "Compacts the current context. Must be the final input item."): Codex's
 * remote compaction v2 streams one.
 */
export const COMPACTION_TRIGGER_KIND = 'compaction_trigger';

const TRIGGER_TYPE = Buffer.from(`"${COMPACTION_TRIGGER_KIND}"`);

/** Bytes no body carrying a compaction item lacks: the check that spares every other body a parse. */
const COMPACTION_TYPE = Buffer.from(`"${COMPACTION_KIND}"`);

/** The `input` items of a parsed body: a string input is one user message. */
export function inputItemsOf(body: Record<string, unknown>): WireItem[] {
  const input = body['input'];
  if (typeof input === 'string') return [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: input }] }];
  return Array.isArray(input) ? input.filter(isRecord) : [];
}

/** Whether a Responses body ends its `input` with a compaction trigger (parsed only when its bytes name one; one that does not parse is the read's to refuse). */
export function asksCompaction(raw: unknown, contentType: string | undefined): boolean {
  if (!Buffer.isBuffer(raw) || !raw.includes(TRIGGER_TYPE)) return false;
  try {
    const input = readJsonObject(raw, contentType)['input'];
    return Array.isArray(input) && input.length > 0 && isRecord(input.at(-1)) && kindOf(input.at(-1) as WireItem) === COMPACTION_TRIGGER_KIND;
  } catch {
    return false;
  }
}

/** The client's body without the compaction trigger that ends its `input`; every other byte as it came. */
export function withoutTrigger(raw: Buffer, contentType: string | undefined): Buffer {
  const input = readJsonObject(raw, contentType)['input'] as unknown[];
  return spliceList(raw, 'input', input.slice(0, -1).map((_, kept) => ({ kept })));
}

/**
 * The client's body with each `compaction` item of its `input` replaced by
 * the messages `open` gives for it (which throws a 400 for one that is not
 * compactor's); the body as it came when it carries none. A body that does
 * not parse is left to the read, which refuses it in its own words.
 */
export function openCompactionItems(raw: Buffer, contentType: string | undefined, open: CarriedOpener): { readonly raw: Buffer; readonly opened: number } {
  if (!raw.includes(COMPACTION_TYPE)) return { raw, opened: 0 };
  let body: Record<string, unknown>;
  try {
    body = readJsonObject(raw, contentType);
  } catch {
    return { raw, opened: 0 };
  }
  const input = body['input'];
  if (!Array.isArray(input)) return { raw, opened: 0 };
  const entries: ListEntry[] = [];
  let opened = 0;
  input.forEach((item: unknown, index) => {
    if (!isRecord(item) || kindOf(item) !== COMPACTION_KIND) return void entries.push({ kept: index });
    opened++;
    for (const value of itemsOfMessages(open(item['encrypted_content'], `input[${index}].encrypted_content`))) entries.push({ value });
  });
  return opened === 0 ? { raw, opened } : { raw: spliceList(raw, 'input', entries), opened };
}

/** Chat messages compactor wrote or kept, as Responses input items: an assistant's calls as `function_call` items after its text. */
function itemsOfMessages(messages: readonly ChatMessage[]): WireItem[] {
  return messages.flatMap((message): WireItem[] => {
    const calls = message.role === 'assistant' ? (message.tool_calls ?? []) : [];
    const fresh = calls.length > 0 && contentText(message.content ?? null) === '' ? undefined : freshItem(message);
    const called = calls.map((call) => ({ type: 'function_call', call_id: call.id, name: call.function.name, arguments: call.function.arguments ?? '' }));
    return [...(fresh === undefined ? [] : [fresh]), ...called];
  });
}

/** The items `/v1/responses/compact` keeps as they came: the input's user messages (a compaction item's notes hold the rest). */
export function keptUserItems(items: readonly WireItem[]): WireItem[] {
  return items.filter((item) => kindOf(item) === 'message' && item['role'] === 'user');
}

/** A compaction item holding compactor's sealed token. */
export function compactionItem(id: string, encryptedContent: string): WireItem {
  return { type: COMPACTION_KIND, id, encrypted_content: encryptedContent };
}

/** The `response.compaction` object (openai-node `CompactedResponse`): the kept items, then the compaction item; its usage in the Responses words. */
export function compactedResponse(fields: { id: string; createdAt: number; output: readonly WireItem[]; inputTokens: number; outputTokens: number }): Record<string, unknown> {
  const { id, createdAt, output, inputTokens, outputTokens } = fields;
  return {
    id,
    object: 'response.compaction',
    created_at: createdAt,
    output,
    usage: { input_tokens: inputTokens, input_tokens_details: { cached_tokens: 0 }, output_tokens: outputTokens, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: inputTokens + outputTokens },
  };
}

/** A `response` object whose output is one compaction item: the answer to a request ending in a compaction trigger. */
export function compactionResponse(fields: { id: string; createdAt: number; model: string; output: readonly WireItem[]; inputTokens: number; outputTokens: number }): Record<string, unknown> {
  const { id, createdAt, model, output, inputTokens, outputTokens } = fields;
  const usage = { input_tokens: inputTokens, input_tokens_details: { cached_tokens: 0 }, output_tokens: outputTokens, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: inputTokens + outputTokens };
  return { id, object: 'response', created_at: createdAt, status: 'completed', model, output, usage };
}

/** That response as the Responses API streams one: created, each output item added and done, completed. */
export function compactionResponseEvents(response: Record<string, unknown>): string {
  let sequence = 0;
  const event = (type: string, data: Record<string, unknown>): string => `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...data })}\n\n`;
  const output = response['output'] as WireItem[];
  return [
    event('response.created', { response: { ...response, status: 'in_progress', output: [] } }),
    ...output.flatMap((item, index) => [event('response.output_item.added', { output_index: index, item }), event('response.output_item.done', { output_index: index, item })]),
    event('response.completed', { response }),
  ].join('');
}
