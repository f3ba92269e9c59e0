import type { FastifyReply } from 'fastify';
import type { PairProblem } from '../../transcript/pairs.js';
import type { ProxyError } from '../../errors.js';
import type { ReadFigures } from '../exchange/planner.js';

/** Which of compactor's routes answered a request; the log line names it. */
export type RouteKind = 'chat' | 'compact' | 'passthrough' | 'ops' | 'dashboard';

/** Told when the response closes, by the one `close` listener every request has (app.ts). */
export interface ResponseCloseListener {
  responseClosed(): void;
}

/** What the per-request log line reports, filled in as the request goes. */
export interface RequestRecord {
  kind: RouteKind;
  /** `performance.now()` when the request arrived. */
  readonly startedAt: number;
  /** Time from sending upstream to the upstream's response headers. */
  upstreamMs: number | null;
  /** Body bytes written to the client. */
  bytes: number;
  /** Tool pairs repaired in this request. */
  repairs: number;
  /** The repairs themselves (their kinds are counted in the metrics). */
  pairRepairs: readonly PairProblem[];
  /** The code of the error that ended the request, or `client_closed`. */
  errorCode: string | null;
  /**
   * The status of the error a started answer ended with (an SSE error event,
   * or a JSON answer cut off), when it differs from the status already sent:
   * logs and metrics count the request with it, not as the 200 it began as.
   */
  errorStatus: number | null;
  /** The llama-server slot the request was pinned to (upstream.slots), and how long it waited in that slot's queue; null when not pinned. */
  slot: number | null;
  /** The server of a fleet the request was last sent to (upstream.servers, its password masked); null with one server. */
  upstreamServer: string | null;
  slotWaitMs: number | null;
  /** What the upstream said it spent on this answer (llama-server's `timings`: `prompt_ms`, `predicted_ms`), or null. */
  server: { readonly prefillMs: number; readonly decodeMs: number } | null;
  /** What the `x-compactor` header (or the last SSE comment) said, or null. */
  report: string | null;
  /** See `ChatContext.keyTenant`. */
  keyTenant: string;
  /** The chat request as read (a valid body), so a refused or failed one is counted on its conversation; null before, or on other routes. */
  chat: ReadFigures | null;
  /**
   * The route's own close handling (the chat exchange), called by the app's
   * listener: one `close` listener per response, not one per layer.
   */
  closeListener: ResponseCloseListener | null;
}

declare module 'fastify' {
  interface FastifyRequest {
    record: RequestRecord;
  }
  interface FastifyContextConfig {
    kind?: RouteKind;
  }
}

const NO_REPAIRS: readonly never[] = [];

/** A request's record as it starts: nothing read, sent or answered yet (in-flight.ts makes one per request). */
export function blankRecord(kind: RouteKind, startedAt: number): RequestRecord {
  return {
    kind,
    startedAt,
    upstreamMs: null,
    bytes: 0,
    repairs: 0,
    pairRepairs: NO_REPAIRS,
    errorCode: null,
    errorStatus: null,
    report: null,
    keyTenant: '',
    chat: null,
    closeListener: null,
    slot: null,
    slotWaitMs: null,
    upstreamServer: null,
    server: null,
  };
}

/** Sends compactor's own error in OpenAI's shape (before anything else was sent). */
export function sendError(reply: FastifyReply, error: ProxyError, errorBody: unknown = error.toBody()): FastifyReply {
  const body = JSON.stringify(errorBody);
  // Absent for what the router refuses before the onRequest hook has made it (see `frameworkErrors` in app.ts).
  const state = reply.request.record as RequestRecord | null | undefined;
  if (state != null) {
    state.errorCode = error.code;
    state.bytes = Buffer.byteLength(body);
  }
  return reply
    .code(error.status)
    .headers({ ...error.headers, 'content-type': 'application/json; charset=utf-8' })
    .send(body);
}

/**
 * The request target sent upstream: the client's path and query. An
 * absolute-form target (`GET http://elsewhere/x`) keeps only its path, so a
 * request can never name another host.
 */
export function targetPath(url: string): string {
  if (url.startsWith('/')) return url;
  try {
    const parsed = new URL(url);
    return `${parsed.pathname}${parsed.search}`;
  } catch {
    return '/';
  }
}
