import { UpstreamStatusError } from '../errors.js';
import type { UpstreamClient } from './client.js';

/**
 * The small JSON surface of the upstream the compaction engine reads: the
 * served window, exact token counts, and the summary calls. The proxy's
 * upstream client implements it (`upstreamJsonOf`, `chatCallOf`); tests can
 * hand in a double.
 */
export interface JsonReply {
  readonly status: number;
  /** The parsed body, or undefined when it was not JSON. */
  readonly body: unknown;
}

/** Request headers for a call made on a client's behalf: its `authorization`, when no upstream key is configured. */
type CallHeaders = Readonly<Record<string, string>>;

/** One non-streamed chat completion, its parsed JSON answer (or a throw). */
type ChatCall = (body: Record<string, unknown>, signal: AbortSignal, headers?: CallHeaders) => Promise<unknown>;

export interface UpstreamJson {
  getJson(path: string, signal?: AbortSignal, headers?: CallHeaders): Promise<JsonReply>;
  postJson(path: string, body: unknown, signal?: AbortSignal, headers?: CallHeaders): Promise<JsonReply>;
}

/** Reads a number at a path of plain objects, or undefined. */
export function numberAt(value: unknown, ...path: string[]): number | undefined {
  let current = value;
  for (const key of path) {
    if (typeof current !== 'object' || current === null) return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return typeof current === 'number' && Number.isFinite(current) ? current : undefined;
}

/** The upstream client as the engine's JSON surface: error statuses come back as replies, not throws. */
export function upstreamJsonOf(upstream: UpstreamClient, timeoutMs: number): UpstreamJson {
  const reply = async (call: () => Promise<unknown>): Promise<JsonReply> => {
    try {
      return { status: 200, body: await call() };
    } catch (error) {
      if (error instanceof UpstreamStatusError) return { status: error.status, body: error.upstreamBody };
      throw error;
    }
  };
  return {
    getJson: (path, signal, headers) =>
      reply(() => upstream.getJson(path, { timeoutMs, ...(signal === undefined ? {} : { signal }), ...(headers === undefined ? {} : { headers }) })),
    postJson: (path, body, signal, headers) =>
      reply(() => upstream.postJson(path, body, { timeoutMs, ...(signal === undefined ? {} : { signal }), ...(headers === undefined ? {} : { headers }) })),
  };
}

/**
 * Summary calls through an upstream client. On the main upstream they carry
 * what the client's request would (the client's credential, or the upstream
 * key); a summary upstream is another server, which gets only its own key
 * (`summary.api_key`, set on its client), never a client's credential.
 */
export function chatCallOf(upstream: UpstreamClient, options: { readonly clientCredentials: boolean }): ChatCall {
  return (body, signal, headers) => upstream.complete(body, { signal, ...(headers === undefined || !options.clientCredentials ? {} : { headers }) });
}
