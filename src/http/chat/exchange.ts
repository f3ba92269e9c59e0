import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../../config/schema.js';
import { InternalError, ProxyError } from '../../errors.js';
import { ExchangeAbort } from '../../upstream/exchange-abort.js';
import { discardBody } from '../../upstream/body.js';
import type { HeaderRecord, UpstreamClient, UpstreamResponse } from '../../upstream/client.js';
import { type ForwardRequestHeadersOptions, forwardRequestHeaders } from '../headers.js';
import { type RequestRecord, type ResponseCloseListener, sendError, targetPath } from '../request-record.js';
import type { Ending, Shutdown } from '../shutdown.js';
import type { ChatHooks, ChatPlan } from './planner.js';
import { type Prepared, prepare } from './prepare.js';
import { readRefusal } from './refusal.js';
import { respond } from './respond.js';
import { pinToSlot } from './slot-pin.js';
import type { SlotLease } from '../../slots/scheduler.js';
import type { SlotRouter } from '../../slots/slot-router.js';
import { CHAT_FORMAT, type WireFormat } from './wire-format.js';

/**
 * One chat completion request, from the client's bytes to the end of the
 * answer: prepare it (prepare.ts: read, pairs, the planner), forward it, and
 * respond (respond.ts, which relays a streamed answer through relay-stream.ts
 * and a JSON one through respond-json.ts). A failure before the answer began
 * gets an OpenAI-shaped error; after it began (progress comments went out),
 * an SSE error event.
 *
 * Per request there is this object and what it must hold; the route's
 * options, the header options and the hooks are shared by every request.
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
  /** The API the route serves (chat completions when absent): how its bodies are read and its errors worded. */
  readonly format?: WireFormat;
  /** The llama-server slots, when scheduled (upstream.slots): a conversation's requests go to its home slot, one at a time. */
  readonly slots?: SlotRouter;
}

/** What every exchange of one route shares: its options, and what follows from them once. */
export class ChatRoute {
  readonly options: ChatRouteOptions;
  /** How the client's headers are forwarded: the same for every request. */
  readonly forwardHeaders: ForwardRequestHeadersOptions;
  readonly format: WireFormat;

  constructor(options: ChatRouteOptions) {
    this.options = options;
    this.format = options.format ?? CHAT_FORMAT;
    this.forwardHeaders = { apiKey: options.upstream.apiKey, dropAcceptEncoding: true };
  }
}

export class ChatExchange implements Ending, ResponseCloseListener {
  readonly request: FastifyRequest;
  readonly reply: FastifyReply;
  readonly response: ServerResponse;
  readonly record: RequestRecord;
  readonly route: ChatRoute;
  readonly abort = new ExchangeAbort();
  /** Why compactor itself ended this exchange (the shutdown's grace period ran out), or null. */
  endedBy: ProxyError | null = null;
  /** Status 200 and SSE headers went out early, with progress comments. */
  early = false;
  /** SSE headers went out (early or with the upstream's answer): the streams gauge counts this exchange. */
  streaming = false;
  /** The slot this exchange holds until its answer ended (see slot-pin.ts). */
  #slotLease: SlotLease | null = null;

  constructor(request: FastifyRequest, reply: FastifyReply, route: ChatRoute) {
    this.request = request;
    this.reply = reply;
    this.response = reply.raw;
    this.record = request.record;
    this.route = route;
    this.record.closeListener = this;
    route.options.shutdown?.onEnd(this);
  }

  /** The shutdown's grace period ran out. */
  end(reason: unknown): void {
    this.endedBy = reason instanceof ProxyError ? reason : new InternalError(reason);
    this.abort.abort();
  }

  /** The response closed: forget the shutdown's hold, close the stream's gauge, and abort upstream if the client left early. */
  responseClosed(): void {
    this.route.options.shutdown?.forget(this);
    if (this.streaming) this.route.options.streams?.closed();
    if (!this.response.writableEnded) this.abort.abort();
  }

  async run(): Promise<void> {
    try {
      await this.#exchange();
    } catch (error) {
      this.#fail(error);
    } finally {
      // The answer ended (relayed, failed or abandoned): the next request of the slot queue may go.
      this.#slotLease?.release();
    }
  }

  async #exchange(): Promise<void> {
    const { hooks } = this.route.options;
    let prepared = await prepare(this);
    if (prepared === undefined) return;
    let answer = await this.#forward(prepared);
    // The upstream refused the prompt at a window smaller than the one planned with: learned, planned again, sent once more.
    const refused = hooks.onRefusal === undefined ? null : await readRefusal(answer);
    if (refused !== null) {
      // Planning again may summarize on this conversation's slot: the slot is not held meanwhile.
      this.#slotLease?.release();
      answer = refused.answer;
      const again = refused.window === null ? undefined : await this.#afterRefusal(prepared, refused.window);
      if (again === null) return;
      if (again !== undefined) [prepared, answer] = [again, await this.#forward(again)];
    }
    const { body: forwarded, bytes, report } = prepared;
    await respond(this, answer, { context: prepared.context, forwarded, forwardedBytes: bytes.length, report, planUsage: prepared.plan?.onUsage, appUsage: hooks.onUsage });
  }

  async #forward(prepared: Prepared): Promise<UpstreamResponse> {
    const request = this.request;
    const headers: HeaderRecord = forwardRequestHeaders(request.headers, this.route.forwardHeaders);
    // Sent again after a refusal: the slot of the first send is given up before the queue is joined again.
    this.#slotLease?.release();
    const pinned = await pinToSlot(this, prepared);
    this.#slotLease = pinned?.lease ?? null;
    const bytes = pinned?.bytes ?? prepared.bytes;
    headers['content-length'] = String(bytes.length);
    if (prepared.changed || pinned !== null || headers['content-type'] === undefined) headers['content-type'] = 'application/json';
    const started = performance.now();
    try {
      return await this.route.options.upstream.forward({ method: 'POST', path: targetPath(request.url), headers, body: bytes, signal: this.abort.emitter });
    } finally {
      this.record.upstreamMs = performance.now() - started;
    }
  }

  /**
   * After a refusal naming a window: the request prepared again when the
   * planner learned a smaller window (undefined: relay the refusal as it
   * came; null: the exchange already ended).
   */
  async #afterRefusal(prepared: Prepared, window: number): Promise<Prepared | null | undefined> {
    if (!(await this.route.options.hooks.onRefusal!(prepared.context, window))) return undefined;
    // Counted here: the refusal sent again is not relayed, where respond() would count it.
    this.route.options.onContextExceeded?.(prepared.context.body.model);
    this.request.log.warn(
      { model: prepared.context.body.model, window },
      'the upstream refused the prompt: its window is smaller than the one planned with (a context_window set too large, or a server restarted with a smaller -c); learned it, compacting and sending once more',
    );
    const again = await prepare(this);
    if (again === undefined) return null;
    const learned = `upstream window ${window} learned from its refusal, sent again`;
    const report = again.report === undefined ? learned : `${learned}; ${again.report}`;
    this.record.report = report;
    return { ...again, report };
  }

  #fail(error: unknown): void {
    if (this.abort.aborted && this.endedBy === null) {
      this.clientGone();
      return;
    }
    const proxyError = this.endedBy ?? (error instanceof ProxyError ? error : new InternalError(error));
    if (proxyError instanceof InternalError) this.request.log.error({ err: error }, 'chat request failed');
    if (!this.early) {
      sendError(this.reply, proxyError, this.route.format.errorBody(proxyError));
      return;
    }
    this.endWithError(proxyError);
  }

  /** Writes compactor's own bytes into the answer (progress and report comments), counted in the log line's `bytes`. */
  write(text: string): void {
    this.record.bytes += Buffer.byteLength(text);
    this.response.write(text);
  }

  /**
   * Ends a started answer with compactor's error event (after `before`, the
   * bytes that close a pending event): the request is logged and counted with
   * the error's status, not the 200 the stream began with.
   */
  endWithError(error: ProxyError, before = ''): void {
    const record = this.record;
    record.errorCode = error.code;
    record.errorStatus = error.status;
    const text = before + this.route.format.errorEvent(error);
    record.bytes += Buffer.byteLength(text);
    this.response.end(text);
  }

  /** SSE headers went out: the active streams gauge counts this exchange until its response closes. */
  streamStarted(): void {
    const streams = this.route.options.streams;
    if (this.streaming || streams === undefined) return;
    this.streaming = true;
    streams.opened();
  }

  /** The client left while the answer was relayed: the upstream request is aborted and the rest of its body discarded. */
  relayLeft(body: UpstreamResponse['body']): void {
    this.abort.abort();
    discardBody(body);
    this.record.errorCode = 'client_closed';
  }

  /**
   * An answer that cannot end with an error event (a JSON body, a compressed
   * stream) broke off: the connection is cut, so it cannot pass for a whole
   * answer, and the request is logged and counted with the error's status.
   */
  cutWithError(error: ProxyError): void {
    this.record.errorCode = error.code;
    this.record.errorStatus = error.status;
    this.response.destroy();
  }

  /** The client left: nothing to answer; the upstream request (if any) is already aborted. */
  clientGone(): void {
    this.record.errorCode = 'client_closed';
    if (!this.reply.sent) this.reply.hijack();
    if (!this.response.destroyed) this.response.destroy();
  }
}

export type { ChatPlan };
