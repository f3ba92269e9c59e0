import type { Server } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ReadFigures } from '../exchange/planner.js';
import type { Metrics } from '../ops/metrics.js';
import { type RequestRecord, blankRecord } from './request-record.js';
import { logRequest } from '../ops/request-log.js';

/**
 * The requests in flight: each gets its record when it arrives and, when
 * its response closes, its log line and its metrics. Draining (a shutdown)
 * waits for the count to reach 0, then closes every connection left:
 * `server.close()` only reaps idle keep-alive ones, and a socket a client
 * opened without sending a request yet would hold the shutdown until its
 * headers timeout.
 *
 * Per request: the record and one `close` listener. The route's own close
 * handling is called from it (`RequestRecord.closeListener`), and the line
 * is written a turn later with `setImmediate`'s arguments, not a closure.
 */


export class InFlight {
  #draining = false;
  #count = 0;
  #started = 0;
  readonly #idleWaiters: Array<() => void> = [];
  readonly #metrics: Metrics;
  readonly #onChatError: ((request: ReadFigures, status: number) => void) | undefined;
  #server: Server | null = null;

  /** `onChatError`: told of each chat request that was read and then refused or failed (status 400 and above), for the dashboard. */
  constructor(metrics: Metrics, onChatError?: (request: ReadFigures, status: number) => void) {
    this.#metrics = metrics;
    this.#onChatError = onChatError;
  }

  /** Requests started since the server began: the memory reducer's sign of quiet. */
  get started(): number {
    return this.#started;
  }

  get draining(): boolean {
    return this.#draining;
  }

  /** The server whose connections are closed once draining and idle. */
  serve(server: Server): void {
    this.#server = server;
  }

  /** Makes the request's record and follows it to the close of its response. */
  track(request: FastifyRequest, reply: FastifyReply): RequestRecord {
    const record = blankRecord(request.routeOptions.config.kind ?? 'passthrough', performance.now());
    request.record = record;
    this.#count++;
    this.#started++;
    const response = reply.raw;
    response.once('close', () => {
      record.closeListener?.responseClosed();
      // Deferred a turn, so the route's own close handling has recorded how the request ended.
      setImmediate(ended, this, request, reply, response.writableEnded, performance.now() - record.startedAt);
    });
    return record;
  }

  /** Called a turn after a response closed. */
  ended(request: FastifyRequest, reply: FastifyReply, finished: boolean, totalMs: number): void {
    const record = request.record;
    this.#count--;
    logRequest(request, reply, finished, totalMs);
    const status = record.errorStatus ?? reply.raw.statusCode;
    this.#metrics.request(record.kind, status, totalMs, record.upstreamMs);
    if (record.chat !== null && status >= 400) this.#onChatError?.(record.chat, status);
    if (record.pairRepairs.length > 0) this.#metrics.pairRepairs(record.pairRepairs);
    this.#closeConnectionsWhenIdle();
  }

  startDraining(): void {
    this.#draining = true;
    this.#closeConnectionsWhenIdle();
  }

  /** Resolves once draining and no request is in flight. */
  whenIdle(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.#idleWaiters.push(resolve);
      this.#closeConnectionsWhenIdle();
    });
  }

  #closeConnectionsWhenIdle(): void {
    if (!this.#draining || this.#count !== 0) return;
    if (this.#server?.listening === true) this.#server.closeAllConnections();
    for (const resolve of this.#idleWaiters.splice(0)) resolve();
  }
}

function ended(inFlight: InFlight, request: FastifyRequest, reply: FastifyReply, finished: boolean, totalMs: number): void {
  inFlight.ended(request, reply, finished, totalMs);
}
