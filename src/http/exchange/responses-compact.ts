import { randomBytes } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { InternalError, InvalidRequestError, ProxyError, SummaryFailedError } from '../../errors.js';
import {
  type CarriedOpener,
  RESPONSES_COMPACT_FORMAT,
  chatRequestView,
  compactedResponse,
  compactionItem,
  compactionResponse,
  compactionResponseEvents,
  inputItemsOf,
  keptUserItems,
  withoutTrigger,
} from '../../formats/registry.js';
import { headLength } from '../../transcript/groups.js';
import { isMarked, mark } from '../../transcript/marks.js';
import { type ChatMessage, contentText } from '../../transcript/message.js';
import { estimateRequestTokens } from '../../transcript/tokens.js';
import { headerText } from '../edge/headers.js';
import { sendError } from '../edge/request-record.js';
import { tenantOfRequest } from '../edge/tenant.js';
import type { CompactRouteOptions } from './compact-history.js';
import { carriedOpener } from './carried-items.js';
import { credentialHeaders } from './engine-planner.js';
import { readExchange } from './read-request.js';
import type { NotesSeal, SealedNotes } from './sealed-notes.js';

/**
 * `POST /v1/responses/compact` (and `/responses/compact`), OpenAI's
 * compaction endpoint served for a local model (issue 38 item 1; openai-node
 * `responses.compact`, `ResponseCompactParams` → `CompactedResponse`): Codex
 * calls it for its remote compaction, and a local server answers 404.
 *
 * The body (`model`, `input`, `instructions`) is read as a `/v1/responses`
 * request is, pairs repaired, any compaction item in it opened (so a second
 * compaction merges the first one's notes). compactor's own summary path
 * then summarizes all of it (the engine's `force`, with its epochs, suffix
 * mode, single flight and cache): the history is given one more turn, a
 * fixed continuation line, so the summary covers every real turn and the
 * same history always meets the same epoch. The answer is a
 * `response.compaction` object whose `output` is what OpenAI keeps (every
 * user message of the input, as it came) followed by one `compaction` item,
 * whose `encrypted_content` is the notes sealed for the tenant
 * (sealed-notes.ts). A later `/v1/responses` request carrying it reaches the
 * upstream with the item opened into the summary pair (carried-items.ts).
 *
 * A `/v1/responses` request whose input ends with a `compaction_trigger`
 * item (Codex's remote compaction v2) is the same compaction, answered as a
 * `response` (streamed when it asked) whose output is the one compaction
 * item: the client keeps its own messages.
 *
 * `previous_response_id` and `conversation` name state compactor does not
 * keep (it is stateless, and llama-server stores no responses): a 400 says
 * so. A history compactor cannot read into its chat view (an input item it
 * does not know), or one too short to summarize, comes back as it came,
 * with no compaction item, and the report says why.
 */

export interface ResponsesCompactOptions extends CompactRouteOptions {
  /** The key the compaction items are sealed with. */
  readonly seal: NotesSeal;
  /** Told of each compaction item sealed (the metrics). */
  readonly onSealed?: () => void;
  /** Told of the items a compaction request carried, opened or refused (the metrics). */
  readonly onCarried?: (outcome: 'opened' | 'refused', count: number) => void;
}

/** The turn the history is given so that the summary covers every real one: the summary tier keeps the last turn raw. */
export const CONTINUATION_LINE = 'The conversation continues after this point.';

/** How the compaction was asked: the compact endpoint, or a `/v1/responses` request ending in a compaction trigger. */
export type CompactionAsk = 'endpoint' | 'trigger';

interface CompactAnswer {
  readonly body: Record<string, unknown>;
  readonly report: string;
  /** A trigger's answer is streamed when its request asked for a stream. */
  readonly stream: boolean;
}

function refuseState(body: Record<string, unknown>): void {
  for (const param of ['previous_response_id', 'conversation']) {
    if (body[param] === undefined || body[param] === null) continue;
    throw new InvalidRequestError({
      code: 'invalid_body',
      param,
      message: `${param}: compactor keeps no responses or conversations (it is stateless, and the local server stores none), so it cannot resolve this one; send the whole history in input`,
    });
  }
}

/**
 * What a compacted history (head, summary pair, what the summary kept raw,
 * the continuation) seals: the notes and the kept messages, its user messages
 * left out (the client keeps those); null when it was not summarized.
 */
function sealedOf(messages: readonly ChatMessage[]): SealedNotes | null {
  const rest = messages.slice(headLength(messages), -1);
  // The summary failed and a truncation stands in its place: the client's history is worth more than the notice.
  if (rest.some((message) => isMarked(message, 'truncated'))) throw new SummaryFailedError('the summary call failed; the history was not compacted', false);
  if (rest.length < 2 || !isMarked(rest[0]!, 'summary')) return null;
  const notes = contentText(rest[0]!.content).slice(mark('summary', '').length);
  return { notes, kept: rest.slice(2).filter((message) => message.role !== 'user' && message.role !== 'system') };
}

/** The earlier compaction items of a compaction request opened, counted as the chat route counts them. */
function openEarlierItems(raw: Buffer, contentType: string | undefined, open: CarriedOpener, options: ResponsesCompactOptions): Buffer {
  try {
    const opened = RESPONSES_COMPACT_FORMAT.openCarried!(raw, contentType, open);
    if (opened.opened > 0) options.onCarried?.('opened', opened.opened);
    return opened.raw;
  } catch (error) {
    options.onCarried?.('refused', 1);
    throw error;
  }
}

async function compact(request: FastifyRequest, options: ResponsesCompactOptions, ask: CompactionAsk, signal: AbortSignal): Promise<CompactAnswer> {
  const { config, engine, upstream, seal } = options;
  const contentType = request.headers['content-type'];
  const tenant = tenantOfRequest({ keyTenant: request.record.keyTenant, headers: request.headers });
  // A trigger is no message of the history: it only asked for this.
  const original: unknown = ask === 'trigger' ? withoutTrigger(request.body as Buffer, contentType) : request.body;
  // Earlier compaction items opened first: their notes are part of the history this compaction merges.
  const opened = Buffer.isBuffer(original) ? openEarlierItems(original, contentType, carriedOpener(seal, tenant), options) : original;
  const settings = { format: RESPONSES_COMPACT_FORMAT, pairs: config.pairs, observing: false, maxItems: config.limits.max_items, maxValues: config.limits.max_values };
  const read = (await readExchange(settings, opened, contentType)).request;
  // The read accepted these bytes: the body's own fields (the chat view has only its messages).
  const body = JSON.parse((original as Buffer).toString('utf8')) as Record<string, unknown>;
  refuseState(body);
  const items = inputItemsOf(body);
  const pairs = read.pairs;
  request.record.repairs = pairs.repairs.length;
  request.record.pairRepairs = pairs.repairs;
  const ratio = engine?.ratios.get(pairs.body.model, tenant) ?? 1;
  const before = Math.round(estimateRequestTokens({ messages: pairs.body.messages, tools: pairs.body['tools'] }) * ratio);
  const stream = ask === 'trigger' && body['stream'] === true;
  // The endpoint answers the kept messages and the item; a trigger's response only the item (the client keeps its messages).
  const answered = (fields: { kept: Record<string, unknown>[]; item: Record<string, unknown>[]; inputTokens: number; outputTokens: number }): Record<string, unknown> =>
    ask === 'endpoint'
      ? compactedResponse({ id: idOf('resp'), createdAt: nowSeconds(), output: [...fields.kept, ...fields.item], inputTokens: fields.inputTokens, outputTokens: fields.outputTokens })
      : compactionResponse({ id: idOf('resp'), createdAt: nowSeconds(), model: pairs.body.model, output: fields.item, inputTokens: fields.inputTokens, outputTokens: fields.outputTokens });
  const unchanged = (why: string): CompactAnswer => ({
    body: answered({ kept: items, item: [], inputTokens: before, outputTokens: 0 }),
    report: [pairs.report, why].filter((line) => line !== undefined).join('; '),
    stream,
  });
  if (read.untouched !== undefined) return unchanged(`nothing compacted: ${read.untouched.replace(/^passed through: /, '')}`);
  if (engine === null || !config.compaction.enabled) return unchanged('nothing compacted: compaction is off');
  const continuation: ChatMessage = { role: 'user', content: CONTINUATION_LINE };
  const messages = [...pairs.body.messages, continuation];
  const prepared = await engine.compact({
    request: chatRequestView({ ...pairs.body, messages }, read.maxOutputTokens),
    tenant,
    signal,
    upstreamHeaders: credentialHeaders(request.headers, RESPONSES_COMPACT_FORMAT, upstream),
    mode: 'force',
  });
  const sealed = sealedOf(prepared.messages);
  if (sealed === null) return unchanged(prepared.report === null ? 'nothing to compact' : `nothing sealed: ${prepared.report}`);
  options.onSealed?.();
  const item = compactionItem(idOf('cmp'), seal.seal(sealed, tenant));
  const after = Math.round(estimateRequestTokens({ messages: [{ role: 'user', content: sealed.notes }, ...sealed.kept] }) * ratio);
  const report = [pairs.report, prepared.report ?? 'compacted'].filter((line) => line !== undefined).join('; ');
  return { body: answered({ kept: keptUserItems(items), item: [item], inputTokens: Math.round(prepared.clientTokens ?? before), outputTokens: after }), report, stream };
}

function idOf(prefix: string): string {
  return `${prefix}_${randomBytes(16).toString('hex')}`;
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

/**
 * One `POST /v1/responses/compact` (the `response.compaction` object as
 * JSON), or one `/v1/responses` request ending in a compaction trigger (a
 * `response`, as JSON or as its stream's events); an error in the Responses
 * API's shape.
 */
export async function runResponsesCompaction(request: FastifyRequest, reply: FastifyReply, options: ResponsesCompactOptions, ask: CompactionAsk = 'endpoint'): Promise<void> {
  // A client that goes away stops the summary it waits for (unless another request shares it).
  const abort = new AbortController();
  const onClose = (): void => {
    if (!reply.raw.writableEnded) abort.abort();
  };
  reply.raw.once('close', onClose);
  try {
    const answer = await compact(request, options, ask, abort.signal);
    if (abort.signal.aborted) return;
    request.record.report = answer.report;
    const text = answer.stream ? compactionResponseEvents(answer.body) : JSON.stringify(answer.body);
    request.record.bytes = Buffer.byteLength(text);
    const contentType = answer.stream ? 'text/event-stream; charset=utf-8' : 'application/json; charset=utf-8';
    await reply.code(200).headers({ 'x-compactor': headerText(answer.report), 'content-type': contentType }).send(text);
  } catch (error) {
    if (abort.signal.aborted) return;
    const proxyError = error instanceof ProxyError ? error : new InternalError(error);
    if (proxyError instanceof InternalError) request.log.error({ err: error }, 'responses compact request failed');
    sendError(reply, proxyError, RESPONSES_COMPACT_FORMAT.errorBody(proxyError));
  }
}
