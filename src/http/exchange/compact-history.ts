import type { FastifyReply, FastifyRequest } from 'fastify';
import type { CompactionEngine } from '../../compaction/engine/engine.js';
import type { Config } from '../../config/schema.js';
import { InternalError, InvalidRequestError, ProxyError } from '../../errors.js';
import { COMPACT_BODY_FORMAT, type ChatRequestBody, PARSE_AHEAD_BYTES, chatRequestView } from '../../formats/registry.js';
import type { BodyBudget } from '../edge/body-budget.js';
import { estimateRequestTokens } from '../../transcript/tokens.js';
import type { Upstream } from '../../upstream/client.js';
import { credentialHeaders } from './engine-planner.js';
import { tenantOfRequest } from '../edge/tenant.js';
import { readExchange } from './read-request.js';
import { headerText } from '../edge/headers.js';
import { sendError } from '../edge/request-record.js';

/**
 * `POST /v1/compact` (and `/compact`): the compacted history as JSON, for a
 * client that keeps its own (an agent's `/compact` command). It takes a chat
 * completions body (`model`, `messages`, `tools` …, optional `"force": true`),
 * handles its pairs as the chat route does, and asks the same engine, with
 * the same epochs, single flight and errors; nothing is forwarded but the
 * summary call itself. Without `force` it compacts only when a chat request
 * would have been compacted; with it, whenever a summary of everything but
 * the last turn makes the history smaller (the notes may cost up to
 * `summary.max_tokens`, so a history smaller than that is left alone), on a
 * known window. It compacts in observe mode too: the client asked for it.
 *
 * Answers `{"object":"compaction","messages":[…],"report":"…",
 * "tokens":{"before":N,"after":N},"epoch":"new"|"reused"|"none"}`.
 */

export interface CompactRouteOptions {
  readonly config: Config;
  readonly upstream: Upstream;
  /** Null when the chat route's planner replaces compactor's engine: the history comes back as it is. */
  readonly engine: CompactionEngine | null;
  /** `limits.in_flight_bytes`, shared with the chat route: a large body takes its place for its read and compaction. */
  readonly bodies?: BodyBudget;
}

export interface CompactionAnswer {
  readonly object: 'compaction';
  readonly messages: readonly unknown[];
  readonly report: string;
  readonly tokens: { readonly before: number; readonly after: number };
  readonly epoch: 'new' | 'reused' | 'none';
}

function forceOf(body: Record<string, unknown>): boolean {
  const force = body['force'];
  if (force === undefined || typeof force === 'boolean') return force === true;
  throw new InvalidRequestError({ code: 'invalid_body', message: 'force: expected true or false', param: 'force' });
}

async function compact(request: FastifyRequest, options: CompactRouteOptions, signal: AbortSignal): Promise<CompactionAnswer> {
  // A large body takes its place in limits.in_flight_bytes, as on the chat route: it may wait, or get a 503.
  const body: unknown = request.body;
  const release = options.bodies !== undefined && Buffer.isBuffer(body) && body.length >= PARSE_AHEAD_BYTES ? await options.bodies.take(body.length) : undefined;
  try {
    return await compactBody(request, options, signal);
  } finally {
    release?.();
  }
}

async function compactBody(request: FastifyRequest, options: CompactRouteOptions, signal: AbortSignal): Promise<CompactionAnswer> {
  const { config, engine, upstream } = options;
  // Read as the chat route reads a chat completion, pairs repaired even in observe mode: the client asked for it.
  const settings = { format: COMPACT_BODY_FORMAT, pairs: config.pairs, observing: false, maxItems: config.limits.max_items, maxValues: config.limits.max_values };
  const read = (await readExchange(settings, request.body, request.headers['content-type'], request.arrival)).request;
  const parsed = read.pairs.before;
  const force = forceOf(parsed);
  // `force` is this route's word, not the model's: it never reaches a summary request.
  const { force: _force, ...rest } = read.pairs.body;
  const pairs = { ...read.pairs, body: { ...rest, model: parsed.model, messages: read.pairs.body.messages } satisfies ChatRequestBody };
  const body: Readonly<Record<string, unknown>> = pairs.body;
  request.record.repairs = pairs.repairs.length;
  request.record.pairRepairs = pairs.repairs;
  const tenant = tenantOfRequest({ keyTenant: request.record.keyTenant, headers: request.headers });
  const ratio = engine?.ratios.get(parsed.model, tenant) ?? 1;
  const tokensOf = (messages: typeof parsed.messages): number => Math.round(estimateRequestTokens({ messages, tools: body['tools'] }) * ratio);
  const before = tokensOf(parsed.messages);
  if (engine === null || !config.compaction.enabled) {
    return { object: 'compaction', messages: pairs.body.messages, report: pairs.report ?? 'compaction is off', tokens: { before, after: tokensOf(pairs.body.messages) }, epoch: 'none' };
  }
  const prepared = await engine.compact({
    request: chatRequestView(pairs.body, read.maxOutputTokens),
    tenant,
    signal,
    upstreamHeaders: credentialHeaders(request.headers, COMPACT_BODY_FORMAT, upstream),
    mode: force ? 'force' : 'compact',
  });
  const report = [pairs.report, prepared.report].filter((line) => line !== undefined && line !== null).join('; ') || 'nothing to compact';
  request.record.report = report;
  return { object: 'compaction', messages: prepared.messages, report, tokens: { before: Math.round(prepared.clientTokens ?? before), after: tokensOf(prepared.messages) }, epoch: prepared.epoch };
}

/** One `POST /v1/compact`: read and planned as a chat request, the compacted history answered as JSON. */
export async function runCompaction(request: FastifyRequest, reply: FastifyReply, options: CompactRouteOptions): Promise<void> {
  // A client that goes away stops the summary it waits for (unless another request shares it).
  const abort = new AbortController();
  const onClose = (): void => {
    if (!reply.raw.writableEnded) abort.abort();
  };
  reply.raw.once('close', onClose);
  try {
    const answer = await compact(request, options, abort.signal);
    if (abort.signal.aborted) return;
    const headers = answer.report === 'nothing to compact' ? {} : { 'x-compactor': headerText(answer.report) };
    const body = JSON.stringify(answer);
    // Counted here: the log line's fallback (Content-Length) is not set yet when a large answer is sent.
    request.record.bytes = Buffer.byteLength(body);
    await reply.code(200).headers({ ...headers, 'content-type': 'application/json; charset=utf-8' }).send(body);
  } catch (error) {
    if (abort.signal.aborted) return;
    const proxyError = error instanceof ProxyError ? error : new InternalError(error);
    if (proxyError instanceof InternalError) request.log.error({ err: error }, 'compact request failed');
    sendError(reply, proxyError);
  }
}
