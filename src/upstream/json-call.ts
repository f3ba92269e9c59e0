import { viaWithOwn } from './via.js';
import type { Dispatcher } from 'undici';
import { UpstreamBadResponseError, UpstreamStatusError, UpstreamTimeoutError } from '../errors.js';
import { discardBody, readBody } from './body.js';
import { toUpstreamError } from './failure.js';
import { isJsonMediaType, mediaTypeOf } from './media-type.js';

/**
 * compactor's own JSON calls to the upstream (summaries, /props, /tokenize):
 * a JSON request whose JSON answer is read whole. Sending (`callJson`: the
 * request, its deadline, reading the body) is kept apart from interpreting
 * the answer (`jsonAnswerOf`: status, media type, parse, into a typed
 * answer), as the
 * Vercel AI SDK's `postToApi` keeps the call apart from its response
 * handlers.
 */

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

/** How a call reaches the upstream: the client's pool, with its base path in front of `path`. */
export interface Sender {
  send(options: { method: 'GET' | 'POST'; path: string; headers: Record<string, string>; body: Buffer | null; signal?: AbortSignal }): Promise<Dispatcher.ResponseData>;
  /** The configured key, sent as `Authorization: Bearer …` when set. */
  readonly apiKey: string | null;
}

/** An answer read whole, not yet interpreted. */
export interface RawAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly bytes: Buffer;
}

// JSON answers compactor reads (completions, /props, token lists) are far below this;
// a larger one is a misbehaving upstream, not something to hold in memory.
const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

/**
 * Sends the call and resolves with its parsed answer. Rejects with
 * `UpstreamStatusError` for an error status, `UpstreamBadResponseError` for
 * an answer that is not JSON, `UpstreamTimeoutError` /
 * `UpstreamUnreachableError` when there is none.
 */
export async function callJson(sender: Sender, method: 'GET' | 'POST', path: string, body: unknown, options: CallOptions = {}): Promise<unknown> {
  return bodyOrThrow(await answerJson(sender, method, path, body, options), path);
}

/** Sends the call and resolves with its {@link JsonAnswer}; rejects only when there is no answer (`UpstreamTimeoutError`, `UpstreamUnreachableError`, a body past `maxBytes`). */
export async function answerJson(sender: Sender, method: 'GET' | 'POST', path: string, body: unknown, options: CallOptions = {}): Promise<JsonAnswer> {
  return jsonAnswerOf(await sendJson(sender, method, path, body, options));
}

/** The sending half: the request made, the answer read whole (bounded), failures mapped to ProxyErrors. */
async function sendJson(sender: Sender, method: 'GET' | 'POST', path: string, body: unknown, options: CallOptions = {}): Promise<RawAnswer> {
  const { signal, timeoutMs, headers = {}, maxBytes = DEFAULT_MAX_RESPONSE_BYTES } = options;
  const deadline = timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs);
  const combined = signal !== undefined && deadline !== undefined ? AbortSignal.any([signal, deadline]) : (signal ?? deadline);
  const requestHeaders: Record<string, string> = { accept: 'application/json' };
  for (const [name, value] of Object.entries(headers)) requestHeaders[name.toLowerCase()] = value;
  if (sender.apiKey !== null) requestHeaders['authorization'] = `Bearer ${sender.apiKey}`;
  requestHeaders['via'] = viaWithOwn(undefined);
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

  let response: Dispatcher.ResponseData;
  try {
    response = await sender.send({ method, path, headers: requestHeaders, body: payload, ...(combined === undefined ? {} : { signal: combined }) });
  } catch (error) {
    return fail(error);
  }
  try {
    return { status: response.statusCode, headers: response.headers, bytes: await readBody(response.body, maxBytes) };
  } catch (error) {
    discardBody(response.body);
    return fail(error);
  }
}

/**
 * What an upstream JSON answer is: the parsed body (`ok`), an error status
 * with its body when that was JSON (`status`), or a success whose body is
 * not JSON (`not-json`). A value, not a throw: a caller that reads a status
 * (a 404 from a server without `/props`) reads it without catching.
 */
export type JsonAnswer =
  | { readonly kind: 'ok'; readonly status: number; readonly body: unknown }
  | { readonly kind: 'status'; readonly status: number; readonly body: unknown; readonly retryAfter: string | undefined }
  | { readonly kind: 'not-json'; readonly status: number };

/** The interpreting half: reads the status, the media type and the body into a {@link JsonAnswer}. */
export function jsonAnswerOf(answer: RawAnswer): JsonAnswer {
  const isJson = isJsonMediaType(mediaTypeOf(answer.headers['content-type']));
  let parsed: unknown;
  let parseFailed = !isJson;
  if (isJson) {
    try {
      parsed = JSON.parse(answer.bytes.toString('utf8'));
    } catch {
      parseFailed = true;
    }
  }
  if (answer.status >= 400) {
    const retryAfter = answer.headers['retry-after'];
    return { kind: 'status', status: answer.status, body: parseFailed ? undefined : parsed, retryAfter: typeof retryAfter === 'string' ? retryAfter : undefined };
  }
  if (parseFailed) return { kind: 'not-json', status: answer.status };
  return { kind: 'ok', status: answer.status, body: parsed };
}

/** The parsed body of an `ok` answer; else the error it means: `UpstreamStatusError` for an error status, `UpstreamBadResponseError` for a body that is not JSON. */
export function bodyOrThrow(answer: JsonAnswer, path: string): unknown {
  switch (answer.kind) {
    case 'ok':
      return answer.body;
    case 'status':
      throw new UpstreamStatusError({
        status: answer.status,
        body: answer.body,
        ...(answer.retryAfter === undefined ? {} : { headers: { 'retry-after': answer.retryAfter } }),
      });
    case 'not-json':
      throw new UpstreamBadResponseError({ message: `the upstream answered ${path} with a body that is not JSON` });
  }
}

export type JsonObject = Record<string, unknown>;

/** The interpreting half of a chat completion: one JSON object. */
export function asCompletion(answer: unknown): JsonObject {
  if (typeof answer !== 'object' || answer === null || Array.isArray(answer)) {
    throw new UpstreamBadResponseError({ message: 'the upstream answered a chat completion with something other than an object' });
  }
  return answer as JsonObject;
}
