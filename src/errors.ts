/**
 * Every error compactor answers with, in one table any layer may import (as
 * undici's lib/core/errors.js). Each class has a stable `code` and renders
 * the body OpenAI clients parse: `{"error":{"message","type","param","code"}}`.
 *
 * | class                       | status  | code                                   |
 * |-----------------------------|---------|----------------------------------------|
 * | InvalidRequestError         | 400     | invalid_body, invalid_json,            |
 * |                             |         | invalid_path, invalid_request,         |
 * |                             |         | invalid_tool_pairs                     |
 * | ContextLengthExceededError  | 400     | context_length_exceeded                |
 * | UnauthorizedError           | 401     | invalid_api_key                        |
 * | MethodNotAllowedError       | 405     | method_not_allowed                     |
 * | RequestTimeoutError         | 408     | request_timeout                        |
 * | PayloadTooLargeError        | 413     | request_too_large                      |
 * | TooManyItemsError           | 413     | request_too_complex                    |
 * | TooManyValuesError          | 413     | request_too_complex                    |
 * | UnsupportedMediaTypeError   | 415     | unsupported_media_type                 |
 * | HeadersTooLargeError        | 431     | headers_too_large                      |
 * | InternalError               | 500     | internal_error                         |
 * | UpstreamUnreachableError    | 502     | upstream_unreachable                   |
 * | UpstreamBadResponseError    | 502     | upstream_bad_response                  |
 * | UpstreamStreamError         | 502     | upstream_stream_failed,                |
 * |                             |         | upstream_stream_incomplete             |
 * | SummaryFailedError          | 502/504 | summary_failed, summary_timeout        |
 * | ShuttingDownError           | 503     | shutting_down                          |
 * | TooManyConnectionsError     | 503     | too_many_connections                   |
 * | BodiesInFlightError         | 503     | too_many_bodies_in_flight              |
 * | LoopDetectedError           | 508     | loop_detected                          |
 * | UpstreamTimeoutError        | 504     | upstream_timeout                       |
 * | UpstreamStatusError         | theirs  | upstream_error (their body passes)     |
 *
 * A `ProxyError` is made in this file only (a test checks it): the table is the whole list.
 *
 * Messages are written for the client: they never hold upstream URLs,
 * internal addresses, stack traces or the request's text.
 */
export type { AnswerReservation } from './answer-reservation.js';
import { type AnswerReservation, reservationAdvice, reservationText } from './answer-reservation.js';

export interface OpenAIErrorBody {
  readonly error: {
    readonly message: string;
    readonly type: string;
    readonly param: string | null;
    readonly code: string | null;
  };
}

export interface ProxyErrorOptions {
  readonly status: number;
  readonly type: string;
  readonly code: string;
  readonly message: string;
  readonly param?: string | null;
  /** Extra response headers, such as `Retry-After`. */
  readonly headers?: Readonly<Record<string, string>>;
  readonly cause?: unknown;
}

export class ProxyError extends Error {
  readonly status: number;
  readonly type: string;
  readonly code: string;
  readonly param: string | null;
  readonly headers: Readonly<Record<string, string>>;

  constructor(options: ProxyErrorOptions) {
    super(options.message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.status = options.status;
    this.type = options.type;
    this.code = options.code;
    this.param = options.param ?? null;
    this.headers = options.headers ?? {};
  }

  toBody(): OpenAIErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/** The codes of a 400 for a request compactor cannot forward. */
export type InvalidRequestCode = 'invalid_body' | 'invalid_header' | 'invalid_json' | 'invalid_path' | 'invalid_request' | 'invalid_tool_pairs';

/** 400: the request is not something compactor can forward. */
export class InvalidRequestError extends ProxyError {
  constructor(options: { code: InvalidRequestCode; message: string; param?: string | null }) {
    super({ status: 400, type: 'invalid_request_error', ...options });
  }
}

/** 408: the request did not arrive whole within Node's `requestTimeout`. */
export class RequestTimeoutError extends ProxyError {
  constructor() {
    super({ status: 408, type: 'invalid_request_error', code: 'request_timeout', message: 'the request took too long to arrive' });
  }
}

/**
 * 408 after the answer began: the client read nothing of it for
 * `upstream.timeouts.idle_ms` (issue 33 item 1). Its connection is cut: the
 * upstream's answer was already taken in (so its llama-server slot went to
 * the next request), and an error event would wait behind the bytes it does
 * not read.
 */
export class ClientStalledError extends ProxyError {
  constructor() {
    super({ status: 408, type: 'invalid_request_error', code: 'client_stalled', message: 'the client did not read the answer within upstream.timeouts.idle_ms' });
  }
}

/** 431: the request's header block is over Node's `maxHeaderSize`. */
export class HeadersTooLargeError extends ProxyError {
  constructor(limitBytes: number) {
    super({ status: 431, type: 'invalid_request_error', code: 'headers_too_large', message: `the request headers are larger than ${limitBytes} bytes` });
  }
}

/** 413: the body is larger than `limits.body_bytes`. */
export class PayloadTooLargeError extends ProxyError {
  constructor(limitBytes: number) {
    super({ status: 413, type: 'invalid_request_error', code: 'request_too_large', message: `the request body is larger than the limit of ${limitBytes} bytes (limits.body_bytes)` });
  }
}

export class TooManyItemsError extends ProxyError { // 413: past limits.max_items, the planning work a request may cost
  constructor(limit: number) {
    super({ status: 413, type: 'invalid_request_error', code: 'request_too_complex', message: `the request carries more than ${limit} messages, tool calls and content parts (limits.max_items)` });
  }
}

/** 413: past limits.max_values, the JSON values a body may hold (counted before any parse). */
export class TooManyValuesError extends ProxyError {
  constructor(limit: number) {
    super({ status: 413, type: 'invalid_request_error', code: 'request_too_complex', message: `the request body holds more than ${limit} JSON values (limits.max_values)` });
  }
}

/** 415: the chat route only reads JSON. */
export class UnsupportedMediaTypeError extends ProxyError {
  constructor(contentType: string) {
    super({ status: 415, type: 'invalid_request_error', code: 'unsupported_media_type', message: `expected Content-Type: application/json, got ${JSON.stringify(contentType.slice(0, 100))}` });
  }
}

/** 401: `auth.keys` is set and the client's Bearer token is not one of them. */
export class UnauthorizedError extends ProxyError {
  constructor() {
    super({
      status: 401, type: 'authentication_error', code: 'invalid_api_key', headers: { 'www-authenticate': 'Bearer' },
      message: 'missing or unknown API key: send one of the configured keys as "Authorization: Bearer <key>"',
    });
  }
}

/** 502: no connection to the upstream, or it broke before an answer. */
export class UpstreamUnreachableError extends ProxyError {
  constructor(options: { reason?: string; cause?: unknown } = {}) {
    super({
      status: 502, type: 'server_error', code: 'upstream_unreachable', cause: options.cause,
      message: `the upstream server cannot be reached${options.reason === undefined ? '' : ` (${options.reason})`}`,
    });
  }
}

/** 502: the upstream answered something that is not an OpenAI-compatible answer (an HTML error page, say). */
export class UpstreamBadResponseError extends ProxyError {
  constructor(options: { message: string; cause?: unknown }) {
    super({ status: 502, type: 'server_error', code: 'upstream_bad_response', ...options });
  }
}

/** 504: connecting, the response headers or a pause inside the body took longer than configured. */
export class UpstreamTimeoutError extends ProxyError {
  constructor(options: { phase: 'connect' | 'headers' | 'idle' | 'call'; cause?: unknown }) {
    const what = {
      connect: 'connecting to the upstream server timed out (upstream.timeouts.connect_ms)',
      headers: 'the upstream server did not answer in time (upstream.timeouts.headers_ms)',
      idle: 'the upstream response stalled (upstream.timeouts.idle_ms)',
      call: 'the upstream call timed out',
    }[options.phase];
    super({ status: 504, type: 'server_error', code: 'upstream_timeout', message: what, cause: options.cause });
  }
}

/**
 * The upstream answered with an error status. Thrown by the upstream client's
 * JSON calls (`complete`, `getJson`, `postJson`); `body` is the upstream's
 * parsed body when it was JSON, and it becomes the response body when this
 * error reaches a client, so the upstream's own words pass through.
 */
export class UpstreamStatusError extends ProxyError {
  readonly upstreamBody: unknown;

  constructor(options: { status: number; body: unknown; headers?: Readonly<Record<string, string>> }) {
    const upstreamMessage = messageOfUpstreamBody(options.body);
    super({
      status: options.status, type: 'server_error', code: 'upstream_error', ...(options.headers === undefined ? {} : { headers: options.headers }),
      message: upstreamMessage ?? `the upstream server answered ${options.status}`,
    });
    this.upstreamBody = options.body;
  }

  override toBody(): OpenAIErrorBody {
    const body = this.upstreamBody;
    if (typeof body === 'object' && body !== null && 'error' in body) return body as OpenAIErrorBody;
    return super.toBody();
  }
}

/** 502 after a streamed answer began: it broke off (`upstream_stream_failed`, with why) or ended without its final event. */
export class UpstreamStreamError extends ProxyError {
  constructor(options: { incomplete: true } | { incomplete: false; reason: string }) {
    super({
      status: 502, type: 'server_error', code: options.incomplete ? 'upstream_stream_incomplete' : 'upstream_stream_failed',
      message: options.incomplete ? 'the upstream stream ended without [DONE]' : `the upstream answer broke off before it was complete (${options.reason})`,
    });
  }
}

/** 503: compactor is shutting down and takes no new requests. */
export class ShuttingDownError extends ProxyError {
  constructor(retryAfterSeconds: number) {
    super({
      status: 503, type: 'server_error', code: 'shutting_down', headers: { 'retry-after': String(retryAfterSeconds), connection: 'close' },
      message: 'compactor is shutting down; retry shortly',
    });
  }
}

/** 503: past `limits.max_connections`, a new connection is answered this rather than taking another client's place. */
export class TooManyConnectionsError extends ProxyError {
  constructor(max: number, retryAfterSeconds: number) {
    super({
      status: 503, type: 'server_error', code: 'too_many_connections', headers: { 'retry-after': String(retryAfterSeconds), connection: 'close' },
      message: `compactor holds its limit of ${max} connections (limits.max_connections); retry shortly`,
    });
  }
}

/** 503: the large bodies being read and planned hold `limits.in_flight_bytes`, and this one waited its turn too long. */
export class BodiesInFlightError extends ProxyError {
  constructor(maxBytes: number) {
    super({
      status: 503, type: 'server_error', code: 'too_many_bodies_in_flight', headers: { 'retry-after': '1' },
      message: `compactor is reading as many large bodies as limits.in_flight_bytes (${maxBytes} bytes) allows; retry shortly`,
    });
  }
}

export class MethodNotAllowedError extends ProxyError {
  constructor(method: string, path: string, allow: readonly string[]) {
    super({ status: 405, type: 'invalid_request_error', code: 'method_not_allowed', message: `${method} ${path} is not answered: use ${allow.join(' or ')}`, headers: { allow: allow.join(', ') } });
  }
}

/** 508: the request already went through this compactor: its upstream leads back to it. */
export class LoopDetectedError extends ProxyError {
  constructor() {
    super({
      status: 508,
      type: 'server_error',
      code: 'loop_detected',
      message:
        'compactor received a request it had sent itself: its upstream (upstream.url, or compaction.summary.upstream) leads back to compactor. Point it at llama-server instead',
    });
  }
}

/** 500: a bug. The details go to the log, not to the client. */
export class InternalError extends ProxyError {
  constructor(cause?: unknown) {
    super({ status: 500, type: 'server_error', code: 'internal_error', message: 'internal error in compactor', cause });
  }
}

/** 400: even compacted, the conversation's last turn (or step) leaves no room for the answer. */
export class ContextLengthExceededError extends ProxyError {
  readonly reservedTokens: number;

  /**
   * @param neededTokens the prompt compacted as far as it goes (without the summary when `summaryTokens` is given)
   * @param reservation the room kept for the answer, and where that number came from
   * @param summaryTokens what a summary of the earlier turns may add, when one would be needed too
   */
  constructor(
    readonly neededTokens: number,
    readonly window: number,
    reservation: AnswerReservation,
    readonly summaryTokens = 0,
  ) {
    const needed = Math.ceil(neededTokens);
    const reserved = reservation.tokens;
    // On a small window the turn itself may fit, and the room kept for the answer and the notes be what does not.
    const turnFits = summaryTokens > 0 && needed + reserved <= window;
    super({
      status: 400,
      type: 'invalid_request_error',
      code: 'context_length_exceeded',
      param: 'messages',
      message:
        `This conversation needs about ${needed} tokens for its prompt plus ${reserved} reserved for the answer (${reservationText(reservation)}), ` +
        `but the model's context window is ${window} tokens` +
        (turnFits
          ? `: its last turn fits, but not with a summary of the earlier turns (up to ${summaryTokens} more tokens, compaction.summary.max_tokens). ` +
            `Lower the summary's size, ${reservationAdvice(reservation)}, or serve a larger window.`
          : `; even compacted, its last turn does not fit. Shorten the last message, ${reservationAdvice(reservation)}, or serve a larger window.`),
    });
    this.reservedTokens = reserved;
  }
}

/** 502/504: a summary was needed, it failed, and `on_summary_failure` is `error`. */
export class SummaryFailedError extends ProxyError {
  constructor(reason: string, timedOut: boolean) {
    super({
      status: timedOut ? 504 : 502, type: 'server_error', code: timedOut ? 'summary_timeout' : 'summary_failed',
      message: `compactor could not summarize this conversation to fit the context window: ${reason}`,
    });
  }
}

function messageOfUpstreamBody(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null || !('error' in body)) return undefined;
  const error: unknown = body.error;
  if (typeof error === 'string') return error;
  if (typeof error === 'object' && error !== null && 'message' in error && typeof error.message === 'string') return error.message;
  return undefined;
}
