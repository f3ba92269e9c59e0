import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ClientStalledError, InternalError, ProxyError } from '../../errors.js';
import { ExchangeAbort } from '../../upstream/exchange-abort.js';
import { discardBody } from '../../upstream/body.js';
import type { UpstreamResponse } from '../../upstream/client.js';
import { SSE_RESPONSE_HEADERS, headerText } from '../edge/headers.js';
import { type RequestRecord, type ResponseCloseListener, sendError } from '../edge/request-record.js';
import type { Ending } from '../ops/shutdown.js';
import { sseComment } from './sse-comment.js';
import { type ServerTimes, compactorLine, serverSecondsText } from './server-line.js';
import type { ChatRoute } from './route.js';

/**
 * The answer writer of one chat exchange: the only code that writes to the
 * client. It alone sends the early head and progress comments, the
 * upstream's head, compactor's own bytes, the error (a JSON error before the
 * answer began, the format's error event after) and the cut; it keeps what
 * the log line and the gauges need (`request.record`, the streams gauge) and
 * the exchange's abort (the client left, or the shutdown ended it).
 */

const NO_BYTES = Buffer.alloc(0);

/** Shared by every early answer: writeHead reads it, never changes it. */
/**
 * The head of a stream that starts before its summary is written: the
 * report is not known yet, so `x-compactor` comes as an HTTP trailer (and as
 * an SSE comment, for clients that read no trailers), declared here; the
 * header itself says where to look, for clients that read headers only.
 */
const EARLY_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/event-stream',
  ...SSE_RESPONSE_HEADERS,
  'x-compactor': 'compacting; the report follows in the x-compactor trailer and a ": summarized ..." SSE comment',
  trailer: 'x-compactor',
  'access-control-expose-headers': 'x-compactor',
};

/** The early head for a client that cannot take trailers (HTTP/1.0): the report comes as an SSE comment only. */
const EARLY_HEADERS_NO_TRAILER: Readonly<Record<string, string>> = {
  'content-type': 'text/event-stream',
  ...SSE_RESPONSE_HEADERS,
  'x-compactor': 'compacting; the report follows in a ": summarized ..." SSE comment',
};

/**
 * Whether the answer can end with trailers: only a chunked HTTP/1.1 body
 * has them (RFC 9112 § 7.1.2), so an HTTP/1.0 client gets none; Node throws
 * `ERR_HTTP_TRAILER_INVALID` on a head that declares them there.
 */
export function trailersAllowed(response: ServerResponse): boolean {
  const request = response.req;
  return request.httpVersionMajor > 1 || (request.httpVersionMajor === 1 && request.httpVersionMinor >= 1);
}

export class AnswerWriter implements Ending, ResponseCloseListener {
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
  #streaming = false;
  /** The client read nothing of the answer for `upstream.timeouts.idle_ms` and was cut. */
  #stalled = false;
  /** The head declared the `x-compactor` trailer (`Trailer: x-compactor`): a stream's end may carry it. */
  #trailing = false;

  constructor(request: FastifyRequest, reply: FastifyReply, route: ChatRoute) {
    this.request = request;
    this.reply = reply;
    this.response = reply.raw;
    this.record = request.record;
    this.route = route;
    this.record.closeListener = this;
    route.options.shutdown?.onEnd(this);
  }

  /** The bytes the client sent (Fastify's `request.body`); empty once forgotten. */
  get clientBytes(): Buffer {
    return (this.request.body as Buffer | undefined) ?? NO_BYTES;
  }

  /**
   * Lets go of the client's bytes once the request was forwarded: the
   * upstream has them (undici keeps what it sent until the answer ends, so
   * what is freed is the client's body when compactor sent another one).
   */
  forgetClientBytes(): void {
    this.request.body = undefined;
    this.request.arrival = null;
  }

  /** The shutdown's grace period ran out. */
  end(reason: unknown): void {
    this.endedBy = reason instanceof ProxyError ? reason : new InternalError(reason);
    this.abort.abort();
  }

  /** The response closed: forget the shutdown's hold, close the stream's gauge, and abort upstream if the client left early. */
  responseClosed(): void {
    this.route.options.shutdown?.forget(this);
    if (this.#streaming) this.route.options.streams?.closed();
    if (!this.response.writableEnded) this.abort.abort();
  }

  /**
   * Sends a progress comment (see `ChatContext.progress`): the first one
   * commits status 200 and the SSE headers. Returns false, doing nothing,
   * when the request is not streamed, `compaction.progress` is off, or the
   * exchange was aborted.
   */
  progress(streamRequested: boolean, comment: string): boolean {
    if (!streamRequested || !this.route.options.config.compaction.progress || this.abort.aborted) return false;
    if (!this.early) {
      this.early = true;
      this.reply.hijack();
      this.#trailing = trailersAllowed(this.response);
      this.response.writeHead(200, this.#trailing ? EARLY_HEADERS : EARLY_HEADERS_NO_TRAILER);
      this.response.flushHeaders();
      this.#streamStarted();
    }
    this.write(sseComment(comment));
    return true;
  }

  /**
   * The upstream's head, passed on; a streamed answer's goes out at once
   * (clients see it start before the first token). A head whose headers
   * declare a `trailer` lets the stream's end carry it ({@link finishStream}).
   */
  head(status: number, headers: OutgoingHttpHeaders, streamed: boolean): void {
    this.reply.hijack();
    this.#trailing = headers['trailer'] !== undefined;
    this.response.writeHead(status, headers);
    if (!streamed) return;
    this.response.flushHeaders();
    this.#streamStarted();
  }

  /**
   * Ends a stream that came whole: the server's seconds as a last SSE comment
   * when `comment` (the stream ended at an event boundary; after the format's
   * final event, where every SSE parser ignores a comment), and the whole
   * `x-compactor` line (`report`, then the server's seconds) in the trailer
   * when the head declared one.
   */
  finishStream(report: string | undefined, server: ServerTimes | null, comment: boolean): void {
    if (server !== null && comment) this.write(sseComment(serverSecondsText(server)));
    this.#addTrailer(report, server);
    this.response.end();
  }

  /** The `x-compactor` trailer, when the head declared it and there is something to say. */
  #addTrailer(report: string | undefined, server: ServerTimes | null): void {
    const line = compactorLine(report, server);
    if (this.#trailing && line !== undefined) this.response.addTrailers({ 'x-compactor': headerText(line) });
  }

  /** Writes compactor's own bytes into the answer (progress and report comments), counted in the log line's `bytes`. */
  write(text: string): void {
    this.record.bytes += Buffer.byteLength(text);
    this.response.write(text);
  }

  /** A failure anywhere in the exchange: the client left, or it gets the error in the format's words. */
  fail(error: unknown): void {
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

  /**
   * Ends a started answer with compactor's error event (after `before`, the
   * bytes that close a pending event): the request is logged and counted with
   * the error's status, not the 200 the stream began with.
   */
  endWithError(error: ProxyError, before = '', report?: string): void {
    const record = this.record;
    record.errorCode = error.code;
    record.errorStatus = error.status;
    const text = before + this.route.format.errorEvent(error);
    record.bytes += Buffer.byteLength(text);
    // An early stream's trailer still carries what compactor did (its head promised it).
    this.#addTrailer(report, null);
    this.response.end(text);
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

  /** The client left while the answer was relayed: the upstream request is aborted and the rest of its body discarded. */
  relayLeft(body: UpstreamResponse['body']): void {
    this.abort.abort();
    discardBody(body);
    if (!this.#stalled) this.record.errorCode = 'client_closed';
  }

  /**
   * The client read nothing of an answer taken in ahead of it for
   * `upstream.timeouts.idle_ms` (client-reads.ts): its connection is cut,
   * as a stalled upstream's stream is, and logged with why. An error event
   * would only wait behind the bytes it does not read.
   */
  clientStalled(): void {
    this.#stalled = true;
    this.cutWithError(new ClientStalledError());
  }

  /** The client left: nothing to answer; the upstream request (if any) is already aborted. */
  clientGone(): void {
    this.record.errorCode = 'client_closed';
    if (!this.reply.sent) this.reply.hijack();
    if (!this.response.destroyed) this.response.destroy();
  }

  /** SSE headers went out: the active streams gauge counts this exchange until its response closes. */
  #streamStarted(): void {
    const streams = this.route.options.streams;
    if (this.#streaming || streams === undefined) return;
    this.#streaming = true;
    streams.opened();
  }
}
