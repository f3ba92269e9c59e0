import type { OutgoingHttpHeaders } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../../config/schema.js';
import { discardBody, failureReason, toUpstreamError, type UpstreamClient, type UpstreamResponse } from '../../upstream/client.js';
import { SseTap, sseComment } from '../../upstream/sse.js';
import { isContextExceeded } from '../../upstream/refusal.js';
import { extractUsage, type UsageFound } from '../../upstream/usage.js';
import type { ChatContext, ChatHooks, ChatPlan, UsageHook } from '../chat/planner.js';
import { applyPairMode, readChatRequest } from '../chat/request.js';
import { InternalError, ProxyError, UpstreamBadResponseError, UpstreamStatusError, sseErrorEvent } from '../../errors.js';
import { SSE_RESPONSE_HEADERS, forwardRequestHeaders, forwardResponseHeaders, isContentEncoded } from '../headers.js';
import { EVENT_STREAM, isJsonMediaType, mediaTypeOf } from '../../upstream/media-type.js';
import { ExchangeAbort } from '../../upstream/exchange-abort.js';
import { onClientGone, relay } from '../relay.js';
import { spliceMessages } from '../chat/splice-messages.js';
import { sendError, targetPath } from '../request-record.js';
import type { Shutdown } from '../shutdown.js';

/**
 * `POST /v1/chat/completions` (and `/chat/completions`): parse once, pairs,
 * the planner seam, forward, stream the answer back byte for byte.
 */

export interface ChatRouteOptions {
  readonly config: Config;
  readonly upstream: UpstreamClient;
  readonly hooks: ChatHooks;
  /** Ends the requests still in flight, with the error to answer (shutdown). */
  readonly shutdown?: Shutdown;
  /** Told when a streamed (SSE) answer starts and when its connection closes (the active streams gauge). */
  readonly streams?: { opened(): void; closed(): void };
  /** Told when the upstream refuses a request as larger than its context (the metrics). */
  readonly onContextExceeded?: (model: string) => void;
}

// A JSON answer copied for the usage tap beyond this size is not parsed:
// completions are small, and a huge one is not worth holding twice.
const MAX_TAPPED_JSON_BYTES = 8 * 1024 * 1024;
// An error body read to relay as an SSE event after progress comments.
const MAX_ERROR_BODY_BYTES = 1024 * 1024;

/** Header values carry ASCII only, on one line. */
function headerText(text: string): string {
  return text.replace(/[^\x20-\x7e]/g, '?');
}

/** The planner's usage hook for this request, then the app's; either may be absent. */
function bothUsageHooks(first: UsageHook | undefined, second: UsageHook | undefined): UsageHook | undefined {
  if (first === undefined || second === undefined) return first ?? second;
  return (observation) => {
    first(observation);
    second(observation);
  };
}

function joinReports(...reports: (string | undefined)[]): string | undefined {
  const present = reports.filter((report): report is string => report !== undefined && report !== '');
  return present.length === 0 ? undefined : present.join('; ');
}

/** A failure after the answer began: the stream broke off or stalled. */
function midStreamError(error: Error): ProxyError {
  const mapped = toUpstreamError(error);
  if (mapped.code === 'upstream_timeout') return mapped;
  return new ProxyError({
    status: 502,
    type: 'server_error',
    code: 'upstream_stream_failed',
    message: `the upstream answer broke off before it was complete (${failureReason(error)})`,
  });
}

const INCOMPLETE_STREAM = new ProxyError({
  status: 502,
  type: 'server_error',
  code: 'upstream_stream_incomplete',
  message: 'the upstream stream ended without [DONE]',
});

// The code an upstream error event is logged with: what UpstreamStatusError names an upstream's error answer.
const UPSTREAM_ERROR_EVENT = 'upstream_error';

function parsedOrUndefined(bytes: Buffer): unknown {
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch {
    return undefined;
  }
}

async function readLimited(body: UpstreamResponse['body'], maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    length += chunk.length;
    if (length > maxBytes) break;
    chunks.push(chunk);
  }
  discardBody(body);
  return Buffer.concat(chunks);
}

/**
 * The planner's view of one request. Its `signal` is made only when read
 * (see ExchangeAbort): a class, so that laziness is a getter on the
 * prototype, not an accessor on every request's object.
 */
class ExchangeContext implements ChatContext {
  readonly body: ChatContext['body'];
  readonly raw: Buffer;
  readonly changed: boolean;
  readonly pairRepairs: ChatContext['pairRepairs'];
  readonly tenant: string;
  readonly headers: ChatContext['headers'];
  readonly log: ChatContext['log'];
  readonly progress: ChatContext['progress'];
  readonly #abort: ExchangeAbort;

  constructor(fields: Omit<ChatContext, 'signal'> & { readonly abort: ExchangeAbort }) {
    this.body = fields.body;
    this.raw = fields.raw;
    this.changed = fields.changed;
    this.pairRepairs = fields.pairRepairs;
    this.tenant = fields.tenant;
    this.headers = fields.headers;
    this.log = fields.log;
    this.progress = fields.progress;
    this.#abort = fields.abort;
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }
}

class ChatExchange {
  readonly #request: FastifyRequest;
  readonly #reply: FastifyReply;
  readonly #options: ChatRouteOptions;
  readonly #abort = new ExchangeAbort();
  /** Why compactor itself ended this exchange (the shutdown's grace period ran out), or null. */
  #endedBy: ProxyError | null = null;
  /** Status 200 and SSE headers went out early, with progress comments. */
  #early = false;
  /** SSE headers went out (early or with the upstream's answer). */
  #streaming = false;

  constructor(request: FastifyRequest, reply: FastifyReply, options: ChatRouteOptions) {
    this.#request = request;
    this.#reply = reply;
    this.#options = options;
    const forget = options.shutdown?.onEnd((reason) => {
      this.#endedBy = reason instanceof ProxyError ? reason : new InternalError(reason);
      this.#abort.abort();
    });
    onClientGone(reply.raw, () => this.#abort.abort(), forget);
  }

  get #response() {
    return this.#reply.raw;
  }

  async run(): Promise<void> {
    try {
      await this.#exchange();
    } catch (error) {
      if (this.#abort.aborted && this.#endedBy === null) {
        this.#clientGone();
        return;
      }
      const proxyError = this.#endedBy ?? (error instanceof ProxyError ? error : new InternalError(error));
      if (proxyError instanceof InternalError) this.#request.log.error({ err: error }, 'chat request failed');
      if (!this.#early) {
        sendError(this.#reply, proxyError);
        return;
      }
      this.#endWithError(proxyError);
    }
  }

  /** Writes compactor's own bytes into the answer (progress and report comments), counted in the log line's `bytes`. */
  #write(text: string): void {
    this.#request.compactor.bytes += Buffer.byteLength(text);
    this.#response.write(text);
  }

  /**
   * Ends a started answer with compactor's error event (after `before`, the
   * bytes that close a pending event): the request is logged and counted with
   * the error's status, not the 200 the stream began with.
   */
  #endWithError(error: ProxyError, before = ''): void {
    const state = this.#request.compactor;
    state.errorCode = error.code;
    state.errorStatus = error.status;
    const text = before + sseErrorEvent(error);
    state.bytes += Buffer.byteLength(text);
    this.#response.end(text);
  }

  async #exchange(): Promise<void> {
    const { config, upstream, hooks } = this.#options;
    const request = this.#request;
    const state = request.compactor;

    const parsed = readChatRequest(request.body, request.headers['content-type']);
    const pairs = applyPairMode(parsed, config.pairs);
    state.repairs = pairs.repairs.length;
    state.pairRepairs = pairs.repairs;
    const raw = request.body as Buffer;
    const streamRequested = parsed['stream'] === true;

    const context = new ExchangeContext({
      body: pairs.body,
      raw,
      changed: pairs.changed,
      pairRepairs: pairs.repairs,
      tenant: state.tenant,
      headers: request.headers,
      log: request.log,
      abort: this.#abort,
      progress: (comment) => {
        if (!streamRequested || !config.compaction.progress || this.#abort.aborted) return false;
        this.#startEarly();
        this.#write(sseComment(comment));
        return true;
      },
    });

    let plan: ChatPlan | undefined;
    if (hooks.planner !== undefined) plan = await hooks.planner(context);
    if (this.#abort.aborted) {
      if (this.#endedBy !== null) throw this.#endedBy;
      this.#clientGone();
      return;
    }

    const changedBody = plan?.body ?? (pairs.changed ? pairs.body : undefined);
    // Only `messages` is rewritten: the rest of the client's bytes go as they came (see splice-messages.ts).
    const bytes = changedBody === undefined ? raw : spliceMessages(raw, changedBody['messages']);
    const report = joinReports(pairs.report, plan?.report);
    state.report = report ?? null;
    const headers = forwardRequestHeaders(request.headers, { apiKey: upstream.apiKey, dropAcceptEncoding: true });
    headers['content-length'] = String(bytes.length);
    if (changedBody !== undefined || headers['content-type'] === undefined) headers['content-type'] = 'application/json';

    const started = performance.now();
    let answer: UpstreamResponse;
    try {
      answer = await upstream.forward({
        method: 'POST',
        path: targetPath(request.url),
        headers,
        body: bytes,
        signal: this.#abort.emitter,
      });
    } finally {
      state.upstreamMs = performance.now() - started;
    }
    const onUsage = bothUsageHooks(plan?.onUsage, hooks.onUsage);
    await this.#respond(answer, { context, forwarded: changedBody ?? pairs.body, forwardedBytes: bytes.length, report, onUsage });
  }

  async #respond(
    answer: UpstreamResponse,
    sent: {
      context: ChatContext;
      forwarded: Readonly<Record<string, unknown>>;
      forwardedBytes: number;
      report: string | undefined;
      onUsage: UsageHook | undefined;
    },
  ): Promise<void> {
    const state = this.#request.compactor;
    const response = this.#response;
    const { status, body } = answer;
    const mediaType = mediaTypeOf(answer.headers['content-type']);
    const streamed = mediaType === EVENT_STREAM;
    // compactor does not ask for compression (no Accept-Encoding), but an upstream may compress anyway. Such a body
    // is relayed as it came and never appended to: decoding it to read it would change the bytes the client gets
    // (it can decode them itself: Content-Encoding goes along) and cost CPU on every chunk, for what the tap gives,
    // which is the usage figures and the [DONE] guard. Without them, a failure cuts the client's connection instead.
    const encoded = isContentEncoded(answer.headers['content-encoding']);

    if (!streamed && !isJsonMediaType(mediaType)) {
      discardBody(body);
      throw new UpstreamBadResponseError({
        message: `the upstream server answered ${status} with ${mediaType === '' ? 'no content type' : mediaType} instead of JSON`,
      });
    }

    if (this.#early) {
      if (!streamed || status >= 300) {
        // Headers are gone: the upstream's error can only reach the client as an SSE error event.
        const text = await readLimited(body, MAX_ERROR_BODY_BYTES);
        const upstreamBody = parsedOrUndefined(text);
        if (isContextExceeded(upstreamBody)) this.#options.onContextExceeded?.(sent.context.body.model);
        const error = status >= 300 ? new UpstreamStatusError({ status, body: upstreamBody }) : new UpstreamBadResponseError({ message: 'the upstream answered a streamed request with JSON' });
        this.#endWithError(error);
        return;
      }
      if (encoded) {
        // The headers went out with the progress comments, uncompressed: compressed bytes cannot follow them.
        discardBody(body);
        throw new UpstreamBadResponseError({
          message: 'the upstream compressed its stream (Content-Encoding) though compactor did not ask it to, after progress comments went out uncompressed',
        });
      }
      if (sent.report !== undefined) this.#write(sseComment(sent.report));
    } else {
      this.#reply.hijack();
      const outgoing: OutgoingHttpHeaders = forwardResponseHeaders(answer.headers);
      if (streamed) Object.assign(outgoing, SSE_RESPONSE_HEADERS);
      if (sent.report !== undefined) outgoing['x-compactor'] = headerText(sent.report);
      response.writeHead(status, outgoing);
      // Clients see the answer start (and its status) before the first token, which may take long.
      if (streamed) {
        response.flushHeaders();
        this.#streamStarted();
      }
    }

    const succeeded = status >= 200 && status < 300;
    const collectUsage = sent.onUsage !== undefined && succeeded;
    // An error answer is read for a context-exceeded refusal: those are small JSON bodies.
    const readRefusal = !succeeded && this.#options.onContextExceeded !== undefined;
    // Compressed bytes are not text: there is nothing for a tap to read in them.
    const tap = streamed && !encoded ? new SseTap({ collectUsage }) : undefined;
    let copy: Buffer[] | undefined = !streamed && !encoded && (collectUsage || readRefusal) ? [] : undefined;
    let copied = 0;
    const maxCopied = collectUsage ? MAX_TAPPED_JSON_BYTES : MAX_ERROR_BODY_BYTES;
    const onChunk =
      tap !== undefined
        ? (chunk: Buffer) => tap.write(chunk)
        : copy !== undefined
          ? (chunk: Buffer) => {
              copied += chunk.length;
              if (copied > maxCopied) copy = undefined;
              else copy?.push(chunk);
            }
          : undefined;

    const end = await relay({ source: body, target: response, ...(onChunk === undefined ? {} : { onChunk }) });
    state.bytes += end.bytes;

    switch (end.kind) {
      case 'client-closed':
        this.#abort.abort();
        discardBody(body);
        state.errorCode = 'client_closed';
        return;
      case 'failed': {
        const error = this.#endedBy ?? midStreamError(end.error);
        if (tap === undefined) {
          // A JSON body (or a compressed one) cut short cannot be mended; a cut connection at least cannot pass for a whole answer.
          state.errorCode = error.code;
          state.errorStatus = error.status;
          response.destroy();
          return;
        }
        this.#endWithError(error, tap.closingBytes());
        return;
      }
      case 'ended':
        break;
    }

    if (tap !== undefined && succeeded && !tap.sawDone && !tap.sawError) {
      this.#endWithError(INCOMPLETE_STREAM, tap.closingBytes());
      return;
    }
    response.end();
    const errorStatus = tap?.errorStatus ?? null;
    if (errorStatus !== null && succeeded) {
      // The upstream's own `data: {"error":…}` already told the client; the log and the metrics say so too.
      state.errorCode = UPSTREAM_ERROR_EVENT;
      state.errorStatus = errorStatus;
    }
    if (readRefusal && copy !== undefined && isContextExceeded(parsedOrUndefined(Buffer.concat(copy)))) {
      this.#options.onContextExceeded?.(sent.context.body.model);
    }

    const onUsage = sent.onUsage;
    if (onUsage === undefined || !succeeded) return;
    const chunks = copy;
    // After the client has its answer: nothing here may delay it.
    setImmediate(() => {
      try {
        let found: UsageFound = {};
        if (tap !== undefined) found = { ...(tap.usage === undefined ? {} : { usage: tap.usage }), ...(tap.timings === undefined ? {} : { timings: tap.timings }) };
        else if (chunks !== undefined) found = extractUsage(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        onUsage({
          context: sent.context,
          forwarded: sent.forwarded,
          forwardedBytes: sent.forwardedBytes,
          status,
          streamed,
          usage: found.usage,
          timings: found.timings,
        });
      } catch (error) {
        this.#request.log.warn({ err: error }, 'usage hook failed');
      }
    });
  }

  #startEarly(): void {
    if (this.#early) return;
    this.#early = true;
    this.#reply.hijack();
    this.#response.writeHead(200, { 'content-type': 'text/event-stream', ...SSE_RESPONSE_HEADERS });
    this.#response.flushHeaders();
    this.#streamStarted();
  }

  #streamStarted(): void {
    const streams = this.#options.streams;
    if (this.#streaming || streams === undefined) return;
    this.#streaming = true;
    streams.opened();
    this.#response.once('close', () => streams.closed());
  }

  /** The client left: nothing to answer; the upstream request (if any) is already aborted. */
  #clientGone(): void {
    this.#request.compactor.errorCode = 'client_closed';
    if (!this.#reply.sent) this.#reply.hijack();
    if (!this.#response.destroyed) this.#response.destroy();
  }
}

export async function chatRoutes(app: FastifyInstance, options: ChatRouteOptions): Promise<void> {
  const bodyLimit = options.config.limits.body_bytes;
  // Every content type is read as bytes, up to the limit (413 beyond): the
  // handler keeps the raw bytes and answers 415 itself, in OpenAI's shape.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit }, (_request, body, done) => {
    done(null, body);
  });
  const handler = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    request.compactor.kind = 'chat';
    await new ChatExchange(request, reply, options).run();
  };
  for (const url of ['/v1/chat/completions', '/chat/completions']) {
    app.post(url, { bodyLimit, config: { kind: 'chat' } }, handler);
  }
}
