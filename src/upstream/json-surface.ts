import { bodyOrThrow } from './json-call.js';
import type { Upstream } from './client.js';

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
export function upstreamJsonOf(upstream: Upstream, timeoutMs: number): UpstreamJson {
  const reply = async (method: 'GET' | 'POST', path: string, body: unknown, signal: AbortSignal | undefined, headers: CallHeaders | undefined): Promise<JsonReply> => {
    const answer = await upstream.answerJson(method, path, body, { timeoutMs, ...(signal === undefined ? {} : { signal }), ...(headers === undefined ? {} : { headers }) });
    // A success that is not JSON is no reply the engine can read: the error it means.
    if (answer.kind === 'not-json') return { status: answer.status, body: bodyOrThrow(answer, path) };
    // Any success reads as 200, as the engine's callers compare it.
    return { status: answer.kind === 'ok' ? 200 : answer.status, body: answer.body };
  };
  return {
    getJson: (path, signal, headers) => reply('GET', path, undefined, signal, headers),
    postJson: (path, body, signal, headers) => reply('POST', path, body, signal, headers),
  };
}

/**
 * Summary calls through an upstream client. On the main upstream they carry
 * what the client's request would (the client's credential, or the upstream
 * key); a summary upstream is another server, which gets only its own key
 * (`summary.api_key`, set on its client), never a client's credential.
 */
export function chatCallOf(upstream: Upstream, options: { readonly clientCredentials: boolean }): ChatCall {
  return (body, signal, headers) => upstream.complete(body, { signal, ...(headers === undefined || !options.clientCredentials ? {} : { headers }) });
}
