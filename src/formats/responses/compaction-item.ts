import type { ChatMessage } from '../../transcript/message.js';
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

/** Bytes no body carrying a compaction item lacks: the check that spares every other body a parse. */
const COMPACTION_TYPE = Buffer.from(`"${COMPACTION_KIND}"`);

/** The `input` items of a parsed body: a string input is one user message. */
export function inputItemsOf(body: Record<string, unknown>): WireItem[] {
  const input = body['input'];
  if (typeof input === 'string') return [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: input }] }];
  return Array.isArray(input) ? input.filter(isRecord) : [];
}

/** Whether a Responses body's `input` carries a compaction item (parsed only when its bytes name one). */
export function carriesCompaction(raw: Buffer, body: Record<string, unknown>): boolean {
  return raw.includes(COMPACTION_TYPE) && inputItemsOf(body).some((item) => kindOf(item) === COMPACTION_KIND);
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
    for (const message of open(item['encrypted_content'], `input[${index}].encrypted_content`)) {
      const fresh = freshItem(message);
      if (fresh !== undefined) entries.push({ value: fresh });
    }
  });
  return opened === 0 ? { raw, opened } : { raw: spliceList(raw, 'input', entries), opened };
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

/** The chat messages of a compaction item opened (`ChatMessage`s the replacement writes), as the Responses items that go upstream. */
export function itemsOfMessages(messages: readonly ChatMessage[]): WireItem[] {
  return messages.map(freshItem).filter((item): item is WireItem => item !== undefined);
}
