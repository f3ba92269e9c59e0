import type { Readable } from 'node:stream';
import { Pool, buildConnector } from 'undici';
import {
  ProxyError,
  UpstreamBadResponseError,
  UpstreamStatusError,
  UpstreamTimeoutError,
  UpstreamUnreachableError,
} from '../errors.js';
import type { AbortEmitter } from './exchange-abort.js';
import { isJsonMediaType, mediaTypeOf } from './media-type.js';
import { skipContinueResponses } from './skip-continue.js';

/**
 * The one way compactor talks to an upstream: a keep-alive undici pool bound
 * to the configured origin. Nothing in a request can choose another host.
 * There are no retries: once bytes reached the upstream, a retry could run a
 * prompt twice on a server that has one slot.
 */

export interface UpstreamTimeouts {
  readonly connectMs: number;
  readonly headersMs: number;
  /** Longest pause between two chunks of a response body. */
  readonly idleMs: number;
}

export interface UpstreamClientOptions {
  /** `http(s)://host:port[/base/path]`; a base path is put in front of every request path. */
  readonly url: string;
  /** Sent as `Authorization: Bearer …`, replacing the client's, when set. */
  readonly apiKey?: string | null;
  readonly timeouts: UpstreamTimeouts;
  /** Most connections open at once; null = as many as requests in flight. */
  readonly connections?: number | null;
}

/** Request headers as undici takes them. */
export type HeaderRecord = Record<string, string | string[]>;

export interface ForwardOptions {
  readonly method: string;
  /** The request target, starting with `/` (path and query). */
  readonly path: string;
  readonly headers: HeaderRecord;
  readonly body?: Buffer | Readable | null;
  /** Aborts the upstream request (the client went away). */
  readonly signal?: AbortSignal | AbortEmitter;
}

export interface UpstreamResponse {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  /** Must be consumed or destroyed by the caller, on every path. */
  readonly body: Readable & { dump(options?: { limit?: number; signal?: AbortSignal }): Promise<void> };
}

export interface CallOptions {
  /** Aborts the call; the promise then rejects with the signal's reason. */
  readonly signal?: AbortSignal;
  /** A deadline for the whole call; past it the call rejects with `UpstreamTimeoutError`. */
  readonly timeoutMs?: number;
  /** Extra request headers, such as the client's `authorization` when no `apiKey` is configured. */
  readonly headers?: Readonly<Record<string, string>>;
  /** Largest response body read; past it the call rejects with `UpstreamBadResponseError`. */
  readonly maxBytes?: number;
}

export type JsonObject = Record<string, unknown>;

// JSON answers compactor reads (completions, /props, token lists) are far below this;
// a larger one is a misbehaving upstream, not something to hold in memory.
const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

// Enough for a loaded server to answer /health; a readiness probe must not hang.
const HEALTH_TIMEOUT_MS = 2_000;

const REASONS: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  EPIPE: 'connection reset',
  UND_ERR_SOCKET: 'connection closed',
  UND_ERR_CLOSED: 'connection closed',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host not found',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
};

function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  if ('code' in error && typeof error.code === 'string') return error.code;
  // Happy-eyeballs connects fail with an AggregateError of one error per address.
  if (error instanceof AggregateError) return errorCode(error.errors[0]);
  return undefined;
}

/** A few words on why a call failed (`connection refused`), naming no address. */
export function failureReason(error: unknown): string {
  const code = errorCode(error);
  return (code !== undefined ? REASONS[code] : undefined) ?? 'request failed';
}

/**
 * What a failed undici call means to a client: a timeout (504) or an
 * unreachable upstream (502). Messages name no address.
 */
export function toUpstreamError(error: unknown): ProxyError {
  if (error instanceof ProxyError) return error;
  const code = errorCode(error);
  switch (code) {
    case 'UND_ERR_CONNECT_TIMEOUT':
      return new UpstreamTimeoutError({ phase: 'connect', cause: error });
    case 'UND_ERR_HEADERS_TIMEOUT':
      return new UpstreamTimeoutError({ phase: 'headers', cause: error });
    case 'UND_ERR_BODY_TIMEOUT':
      return new UpstreamTimeoutError({ phase: 'idle', cause: error });
    default:
      return new UpstreamUnreachableError({ reason: failureReason(error), cause: error });
  }
}

function ignore(): void {}

/**
 * Ends an upstream body that will not be read (its connection is closed).
 * undici emits an abort error when an unfinished body is destroyed; it is
 * expected here, so it is swallowed instead of crashing the process.
 */
export function discardBody(body: Readable): void {
  body.on('error', ignore);
  body.destroy();
}

async function readBody(body: Readable, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    length += chunk.length;
    if (length > maxBytes) {
      discardBody(body);
      throw new UpstreamBadResponseError({ message: `the upstream answer is larger than ${maxBytes} bytes` });
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, length);
}

export class UpstreamClient {
  readonly #pool: Pool;
  readonly #basePath: string;
  readonly #apiKey: string | null;

  constructor(options: UpstreamClientOptions) {
    const { url, apiKey = null, timeouts, connections = null } = options;
    const parsed = new URL(url);
    this.#basePath = parsed.pathname.replace(/\/+$/, '');
    this.#apiKey = apiKey;
    const connect = buildConnector({ timeout: timeouts.connectMs });
    this.#pool = new Pool(parsed.origin, {
      // Each new connection drops the 100 Continue answers undici would fail on (see skip-continue.ts).
      connect: (options, callback) => {
        connect(options, (...outcome) => {
          // A failed connect calls back with the error alone.
          if (outcome[0] === null) skipContinueResponses(outcome[1]);
          callback(...outcome);
        });
      },
      headersTimeout: timeouts.headersMs,
      bodyTimeout: timeouts.idleMs,
      connections,
    });
  }

  /**
   * Requests queued or in flight, their response bodies not yet read to the
   * end or destroyed: back to 0 whenever nothing is in flight, or something
   * leaks (tests and the soak check it).
   */
  get activeRequests(): number {
    const { queued, running } = this.#pool.stats;
    return queued + running;
  }

  /** The configured key, when compactor authenticates to the upstream itself. */
  get apiKey(): string | null {
    return this.#apiKey;
  }

  /**
   * Sends a request and resolves with the response head and its streaming
   * body. Rejects with a `ProxyError` (502/504) when there is no answer, or
   * with the signal's reason when `signal` aborted it.
   */
  async forward(options: ForwardOptions): Promise<UpstreamResponse> {
    const { method, path, headers, body = null, signal } = options;
    try {
      const response = await this.#pool.request({
        method: method as 'GET',
        path: this.#basePath + path,
        headers,
        body,
        ...(signal === undefined ? {} : { signal }),
      });
      return { status: response.statusCode, headers: response.headers, body: response.body };
    } catch (error) {
      if (signal?.aborted === true) throw error;
      throw toUpstreamError(error);
    }
  }

  /**
   * A JSON request whose JSON answer is read whole: for compactor's own calls
   * (summaries, /props, /tokenize). Rejects with `UpstreamStatusError` for an
   * error status, `UpstreamBadResponseError` for an answer that is not JSON,
   * `UpstreamTimeoutError` / `UpstreamUnreachableError` when there is none.
   */
  async callJson(method: 'GET' | 'POST', path: string, body: unknown, options: CallOptions = {}): Promise<unknown> {
    const { signal, timeoutMs, headers = {}, maxBytes = DEFAULT_MAX_RESPONSE_BYTES } = options;
    const deadline = timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs);
    const combined = signal !== undefined && deadline !== undefined ? AbortSignal.any([signal, deadline]) : (signal ?? deadline);
    const requestHeaders: HeaderRecord = { accept: 'application/json' };
    for (const [name, value] of Object.entries(headers)) requestHeaders[name.toLowerCase()] = value;
    if (this.#apiKey !== null) requestHeaders['authorization'] = `Bearer ${this.#apiKey}`;
    let payload: Buffer | null = null;
    if (body !== undefined) {
      payload = Buffer.from(JSON.stringify(body));
      requestHeaders['content-type'] = 'application/json';
    }

    const fail = (error: unknown): never => {
      if (signal?.aborted === true) throw signal.reason;
      if (deadline?.aborted === true) throw new UpstreamTimeoutError({ phase: 'call', cause: error });
      throw toUpstreamError(error);
    };

    let response;
    try {
      response = await this.#pool.request({
        method,
        path: this.#basePath + path,
        headers: requestHeaders,
        body: payload,
        ...(combined === undefined ? {} : { signal: combined }),
      });
    } catch (error) {
      return fail(error);
    }
    let bytes: Buffer;
    try {
      bytes = await readBody(response.body, maxBytes);
    } catch (error) {
      discardBody(response.body);
      return fail(error);
    }

    const isJson = isJsonMediaType(mediaTypeOf(response.headers['content-type']));
    let parsed: unknown;
    let parseFailed = !isJson;
    if (isJson) {
      try {
        parsed = JSON.parse(bytes.toString('utf8'));
      } catch {
        parseFailed = true;
      }
    }
    if (response.statusCode >= 400) {
      const retryAfter = response.headers['retry-after'];
      throw new UpstreamStatusError({
        status: response.statusCode,
        body: parseFailed ? undefined : parsed,
        ...(typeof retryAfter === 'string' ? { headers: { 'retry-after': retryAfter } } : {}),
      });
    }
    if (parseFailed) {
      throw new UpstreamBadResponseError({ message: `the upstream answered ${path} with a body that is not JSON` });
    }
    return parsed;
  }

  /** `GET path` with a JSON answer (`/props`, `/v1/models`). */
  getJson(path: string, options?: CallOptions): Promise<unknown> {
    return this.callJson('GET', path, undefined, options);
  }

  /** `POST path` with a JSON body and answer (`/tokenize`, `/apply-template`, `/v1/chat/completions/input_tokens`). */
  postJson(path: string, body: unknown, options?: CallOptions): Promise<unknown> {
    return this.callJson('POST', path, body, options);
  }

  /**
   * A non-streamed chat completion, for compactor's own calls (summaries).
   * `stream` is forced off and `stream_options` dropped, so the answer is one
   * JSON object.
   *
   * @example
   * const answer = await upstream.complete({ model: 'm', messages }, { timeoutMs: 300_000 });
   * // answer.choices[0].message.content
   */
  async complete(body: Readonly<JsonObject>, options?: CallOptions): Promise<JsonObject> {
    const { stream_options: _streamOptions, ...rest } = body;
    const answer = await this.postJson('/v1/chat/completions', { ...rest, stream: false }, options);
    if (typeof answer !== 'object' || answer === null || Array.isArray(answer)) {
      throw new UpstreamBadResponseError({ message: 'the upstream answered a chat completion with something other than an object' });
    }
    return answer as JsonObject;
  }

  /**
   * Whether the upstream is ready: llama-server's `/health` answers 200 once
   * the model is loaded (503 before). Servers without `/health` are asked for
   * `/v1/models` instead.
   */
  async health(options: { timeoutMs?: number } = {}): Promise<{ ready: boolean; status: number | null }> {
    const { timeoutMs = HEALTH_TIMEOUT_MS } = options;
    const probe = async (path: string): Promise<number | null> => {
      try {
        const response = await this.#pool.request({
          method: 'GET',
          path: this.#basePath + path,
          headers: this.#apiKey === null ? {} : { authorization: `Bearer ${this.#apiKey}` },
          signal: AbortSignal.timeout(timeoutMs),
        });
        await response.body.dump().catch(() => undefined);
        return response.statusCode;
      } catch {
        return null;
      }
    };
    let status = await probe('/health');
    if (status === 404) status = await probe('/v1/models');
    return { ready: status !== null && status >= 200 && status < 300, status };
  }

  /** Waits up to `graceMs` for requests in flight, then cuts them. */
  async close(options: { graceMs?: number } = {}): Promise<void> {
    const { graceMs = 1_000 } = options;
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), graceMs);
      timer.unref();
    });
    const outcome = await Promise.race([this.#pool.close().then(() => 'closed' as const), grace]);
    clearTimeout(timer);
    if (outcome === 'late') await this.#pool.destroy();
  }
}
