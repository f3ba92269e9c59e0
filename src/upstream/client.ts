import type { Readable } from 'node:stream';
import { type Dispatcher, Pool, buildConnector } from 'undici';
import type { AbortEmitter } from './exchange-abort.js';
import { toUpstreamError } from './failure.js';
import { type Health, HEALTH_TIMEOUT_MS, checkHealth } from './health.js';
import { type CallOptions, type JsonAnswer, type JsonObject, type Sender, answerJson, asCompletion, callJson } from './json-call.js';
import { skipContinueResponses } from './skip-continue.js';

export type { CallOptions, JsonObject } from './json-call.js';

/**
 * The one way compactor talks to an upstream: a keep-alive undici pool bound
 * to the configured origin. Nothing in a request can choose another host.
 * There are no retries: once bytes reached the upstream, a retry could run a
 * prompt twice on a server that has one slot.
 *
 * This module is the pool and the forwarded request (`forward`, the proxy's
 * hot path: no work beyond undici's). compactor's own JSON calls are in
 * json-call.ts, the readiness probe in health.ts, what a failure means in
 * failure.ts; the client lends them its pool (`send`).
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

/**
 * What the proxy asks of its upstream: one server's client, or a fleet's
 * (fleet/fleet-upstream.ts: calls that belong to no conversation go to a
 * healthy server of the fleet).
 */
export type Upstream = Pick<UpstreamClient, 'forward' | 'send' | 'answerJson' | 'getJson' | 'postJson' | 'complete' | 'health' | 'close' | 'apiKey' | 'activeRequests'>;

export class UpstreamClient implements Sender {
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

  /** The pool with the base path, for json-call.ts and health.ts. */
  send(options: Parameters<Sender['send']>[0]): Promise<Dispatcher.ResponseData> {
    return this.#pool.request({ ...options, path: this.#basePath + options.path });
  }

  /** See json-call.ts: a JSON request whose JSON answer is read whole, as a typed answer (an error status is a value, not a throw). */
  answerJson(method: 'GET' | 'POST', path: string, body: unknown, options?: CallOptions): Promise<JsonAnswer> {
    return answerJson(this, method, path, body, options);
  }

  /** `GET path` with a JSON answer (`/props`, `/v1/models`). */
  getJson(path: string, options?: CallOptions): Promise<unknown> {
    return callJson(this, 'GET', path, undefined, options);
  }

  /** `POST path` with a JSON body and answer (`/tokenize`, `/apply-template`, `/v1/chat/completions/input_tokens`). */
  postJson(path: string, body: unknown, options?: CallOptions): Promise<unknown> {
    return callJson(this, 'POST', path, body, options);
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
    return asCompletion(await callJson(this, 'POST', '/v1/chat/completions', { ...rest, stream: false }, options));
  }

  /** See health.ts: whether the upstream is ready (`/health`, else `/v1/models`). */
  health(options: { timeoutMs?: number } = {}): Promise<Health> {
    return checkHealth(this, options.timeoutMs ?? HEALTH_TIMEOUT_MS);
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
