import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadFixture } from './fixtures.js';
import { parseSse } from './sse.js';

/**
 * A loopback llama-server double. It serves the recorded shapes of
 * `test/fixtures/llama-server/`, records every request (body included),
 * notices when a client goes away, and injects faults.
 *
 * How a request is answered, first match wins:
 * 1. the script: one-shot replies queued for a path with `script()`;
 * 2. the route handler set with `route()` (tests and later issues replace
 *    `/props`, `/tokenize`, … here);
 * 3. the defaults below, built from the recordings.
 *
 * A reply is a function of the exchange, so new behaviours (a tokenizer, a
 * prefix cache reporting `timings.cache_n`) are new functions, not new modes.
 */

export interface RecordedRequest {
  readonly method: string;
  /** Path and query, as received. */
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
  /** The body parsed as JSON, when it is JSON. */
  readonly json: unknown;
  readonly receivedAt: number;
  /** When the response finished normally. */
  finishedAt: number | null;
  /** When the connection closed before the response finished (the client aborted). */
  abortedAt: number | null;
}

export interface FakeExchange {
  readonly request: RecordedRequest;
  readonly response: ServerResponse;
  readonly upstream: FakeUpstream;
  /** Aborted when the client goes away. */
  readonly signal: AbortSignal;
}

export type FakeReply = (exchange: FakeExchange) => void | Promise<void>;

function routeKey(method: string, path: string): string {
  return `${method.toUpperCase()} ${path}`;
}

function pathOnly(path: string): string {
  const query = path.indexOf('?');
  return query === -1 ? path : path.slice(0, query);
}

function requestJson(request: RecordedRequest): Record<string, unknown> {
  const json = request.json;
  return typeof json === 'object' && json !== null && !Array.isArray(json) ? (json as Record<string, unknown>) : {};
}

export class FakeUpstream {
  readonly requests: RecordedRequest[] = [];
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  readonly #routes = new Map<string, FakeReply>();
  readonly #scripts = new Map<string, FakeReply[]>();
  #refuse = false;
  /** Connections closed at once by `refuseConnections` (a dead server: each request sent to it is one). */
  refused = 0;

  private constructor() {
    this.#server = createServer((request, response) => {
      void this.#handle(request, response);
    });
    this.#server.on('connection', (socket) => {
      if (this.#refuse) {
        this.refused++;
        socket.destroy();
        return;
      }
      this.#sockets.add(socket);
      socket.once('close', () => this.#sockets.delete(socket));
    });
  }

  /** Listens on 127.0.0.1, on a free port unless one is given (the demo's stand-in llama-server takes 8080). */
  static async start(port = 0): Promise<FakeUpstream> {
    const upstream = new FakeUpstream();
    await new Promise<void>((resolve, reject) => {
      upstream.#server.once('error', reject);
      upstream.#server.listen(port, '127.0.0.1', resolve);
    });
    return upstream;
  }

  get port(): number {
    return (this.#server.address() as AddressInfo).port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Requests received for a path (query ignored). */
  requestsTo(path: string): RecordedRequest[] {
    return this.requests.filter((request) => pathOnly(request.path) === path);
  }

  /** Replaces the handler of a route (method and path, query ignored). */
  route(method: string, path: string, reply: FakeReply): this {
    this.#routes.set(routeKey(method, path), reply);
    return this;
  }

  /** Queues one-shot replies for a path (any method), used in order before the route handler. */
  script(path: string, ...replies: FakeReply[]): this {
    const queue = this.#scripts.get(path) ?? [];
    queue.push(...replies);
    this.#scripts.set(path, queue);
    return this;
  }

  /** While on, every new connection is closed at once, before a byte is read. */
  refuseConnections(on = true): this {
    this.#refuse = on;
    return this;
  }

  /** A server that died: the connections it has are cut, and each new one is closed at once (counted in `refused`) until `refuseConnections(false)`. */
  kill(): this {
    this.#refuse = true;
    for (const socket of this.#sockets) socket.destroy();
    return this;
  }

  /** Forgets recorded requests, scripts and route overrides. */
  reset(): void {
    this.requests.length = 0;
    this.#routes.clear();
    this.#scripts.clear();
    this.#refuse = false;
  }

  /** Resolves once `predicate` holds, polling; rejects after `timeoutMs`. */
  async waitFor(predicate: () => boolean, options: { timeoutMs?: number; what?: string } = {}): Promise<void> {
    const { timeoutMs = 10_000, what = 'condition' } = options;
    const deadline = Date.now() + timeoutMs;
    while (!predicate()) {
      if (Date.now() > deadline) throw new Error(`fake upstream: timed out waiting for ${what}`);
      await sleep(10);
    }
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #handle(incoming: import('node:http').IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of incoming) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    let json: unknown;
    try {
      json = body.length > 0 ? JSON.parse(body.toString('utf8')) : undefined;
    } catch {
      json = undefined;
    }
    const request: RecordedRequest = {
      method: incoming.method ?? 'GET',
      path: incoming.url ?? '/',
      headers: incoming.headers,
      body,
      json,
      receivedAt: Date.now(),
      finishedAt: null,
      abortedAt: null,
    };
    this.requests.push(request);
    const controller = new AbortController();
    response.once('close', () => {
      if (response.writableFinished) request.finishedAt = Date.now();
      else {
        request.abortedAt = Date.now();
        controller.abort();
      }
    });

    const path = pathOnly(request.path);
    const reply =
      this.#scripts.get(path)?.shift() ?? this.#routes.get(routeKey(request.method, path)) ?? defaultReply(request.method, path);
    try {
      await reply({ request, response, upstream: this, signal: controller.signal });
    } catch (error) {
      if (!controller.signal.aborted) response.destroy(error instanceof Error ? error : new Error(String(error)));
    }
  }
}

const defaultReplies = new Map<string, FakeReply>();

/** The route table of the double when nothing else is set (each reply built once: fixtures are read once). */
function defaultReply(method: string, path: string): FakeReply {
  const key = routeKey(method, path);
  let reply = defaultReplies.get(key);
  if (reply === undefined) {
    reply = buildDefaultReply(key);
    // Unknown routes are not remembered: a test may probe any number of them.
    if (reply !== unknownRoute()) defaultReplies.set(key, reply);
  }
  return reply;
}

let unknownRouteReply: FakeReply | undefined;
function unknownRoute(): FakeReply {
  unknownRouteReply ??= replies.fixture('unknown_route');
  return unknownRouteReply;
}

function buildDefaultReply(key: string): FakeReply {
  switch (key) {
    case 'GET /health':
      return replies.fixture('health');
    case 'GET /props':
      return replies.fixture('props.json');
    case 'GET /v1/models':
    case 'GET /models':
      return replies.fixture('v1_models.json');
    case 'GET /slots':
      return replies.fixture('slots');
    case 'GET /metrics':
      return replies.fixture('metrics');
    case 'POST /tokenize':
      return replies.fixture('tokenize');
    case 'POST /apply-template':
      return replies.fixture('apply_template');
    case 'POST /v1/chat/completions':
    case 'POST /chat/completions':
      return replies.chat();
    default:
      return unknownRoute();
  }
}

function writeHead(response: ServerResponse, status: number, headers: ReadonlyArray<readonly [string, string]>): void {
  for (const [name, value] of headers) {
    // The recorded Keep-Alive / Connection describe the recorder's connection, not ours.
    if (/^(keep-alive|connection|transfer-encoding)$/i.test(name)) continue;
    response.setHeader(name, value);
  }
  response.writeHead(status);
}

async function writeChunks(exchange: FakeExchange, chunks: readonly (string | Buffer)[], delayMs: number): Promise<boolean> {
  for (const chunk of chunks) {
    if (exchange.signal.aborted) return false;
    if (!exchange.response.write(chunk)) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          exchange.response.off('drain', done);
          exchange.signal.removeEventListener('abort', done);
          resolve();
        };
        exchange.response.once('drain', done);
        exchange.signal.addEventListener('abort', done);
      });
    }
    if (delayMs > 0) await sleep(delayMs);
    else await new Promise((resolve) => setImmediate(resolve));
  }
  return !exchange.signal.aborted;
}

/** Splits a body into pieces of `size` bytes, cutting through multi-byte characters on purpose. */
/** A recorded SSE body as the events it was written in, every byte kept. */
function rawEvents(body: Buffer): string[] {
  return parseSse(body, { dispatchAtEnd: true }).map((event) => event.raw);
}

function splitBytes(body: Buffer, size: number): Buffer[] {
  const pieces: Buffer[] = [];
  for (let start = 0; start < body.length; start += size) pieces.push(body.subarray(start, start + size));
  return pieces;
}

function waitForAbort(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}

export interface SseOptions {
  /** Write in pieces of this many bytes (1 = byte by byte) instead of event by event. */
  readonly chunkBytes?: number;
  /** Pause between writes. */
  readonly delayMs?: number;
  readonly status?: number;
}

export interface ChatStreamOptions {
  /** Content pieces, one chunk each. */
  readonly content?: readonly string[];
  readonly toolCalls?: ReadonlyArray<{ readonly id: string; readonly name: string; readonly argumentPieces: readonly string[] }>;
  readonly includeUsage?: boolean;
  readonly usage?: { prompt_tokens: number; completion_tokens: number };
  readonly timings?: Record<string, number>;
}

const CHUNK_FRAME = { created: 1795997435, id: 'chatcmpl-fake', model: '/models/tiny.gguf', system_fingerprint: 'b10587-3f545bec', object: 'chat.completion.chunk' };

/** SSE events in llama-server's framing (role chunk, deltas, finish chunk with timings, usage chunk, [DONE]). */
export function chatStreamEvents(options: ChatStreamOptions = {}): string[] {
  const { content = ['Hello', ' there'], toolCalls = [], includeUsage = true } = options;
  const usage = options.usage ?? { prompt_tokens: 25, completion_tokens: content.length };
  const timings = options.timings ?? { cache_n: 24, prompt_n: 1, prompt_ms: 1.2, predicted_n: usage.completion_tokens, predicted_ms: 8.2 };
  const event = (value: unknown): string => `data: ${JSON.stringify(value)}\n\n`;
  const delta = (value: unknown, finish: string | null = null): string =>
    event({ choices: [{ finish_reason: finish, index: 0, delta: value }], ...CHUNK_FRAME });
  const events = [delta({ role: 'assistant', content: null })];
  for (const piece of content) events.push(delta({ content: piece }));
  toolCalls.forEach((call, index) => {
    call.argumentPieces.forEach((piece, pieceIndex) => {
      const fn = pieceIndex === 0 ? { name: call.name, arguments: piece } : { arguments: piece };
      const entry = pieceIndex === 0 ? { index, id: call.id, type: 'function', function: fn } : { index, function: fn };
      events.push(delta({ tool_calls: [entry] }));
    });
  });
  events.push(
    event({ choices: [{ finish_reason: toolCalls.length > 0 ? 'tool_calls' : 'stop', index: 0, delta: {} }], ...CHUNK_FRAME, timings }),
  );
  if (includeUsage) {
    events.push(event({ choices: [], ...CHUNK_FRAME, usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens }, timings }));
  }
  events.push('data: [DONE]\n\n');
  return events;
}

/**
 * An SSE answer of `count` copies of `event`, each written once the client's
 * side has drained (backpressure honoured, as llama-server does), then
 * `[DONE]`; it stops when the client leaves. `written()` is how many event
 * bytes it has written so far: what a backpressure test looks at.
 */
export function floodingStream(event: Buffer, count: number): { readonly reply: FakeReply; written(): number } {
  let written = 0;
  const reply: FakeReply = async ({ response, signal }) => {
    response.writeHead(200, { 'content-type': 'text/event-stream' });
    for (let index = 0; index < count && !signal.aborted; index++) {
      written += event.length;
      if (!response.write(event)) await new Promise((resolve) => response.once('drain', resolve));
    }
    response.end('data: [DONE]\n\n');
  };
  return { reply, written: () => written };
}

/** Reply factories. Each returns a `FakeReply`; compose them freely. */
export const replies = {
  /** A recorded exchange, bytes as recorded (`name` without `.txt`, or a bare `.json`). */
  fixture(name: string): FakeReply {
    const recorded = loadFixture(name);
    return async (exchange) => {
      writeHead(exchange.response, recorded.status, recorded.headers);
      const isStream = recorded.headers.some(([key, value]) => key.toLowerCase() === 'content-type' && value.startsWith('text/event-stream'));
      if (isStream) {
        if (await writeChunks(exchange, rawEvents(recorded.body), 0)) exchange.response.end();
      } else {
        exchange.response.end(recorded.body);
      }
    };
  },

  json(status: number, body: unknown, headers: Readonly<Record<string, string>> = {}): FakeReply {
    return ({ response }) => {
      const bytes = Buffer.from(JSON.stringify(body));
      response.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': String(bytes.length), ...headers });
      response.end(bytes);
    };
  },

  /** An SSE answer: the events (or raw body) written event by event, or in pieces of `chunkBytes`. */
  sse(events: readonly string[] | Buffer, options: SseOptions = {}): FakeReply {
    const { chunkBytes, delayMs = 0, status = 200 } = options;
    return async (exchange) => {
      exchange.response.writeHead(status, { 'content-type': 'text/event-stream', 'x-accel-buffering': 'no' });
      exchange.response.flushHeaders();
      const body = Buffer.isBuffer(events) ? events : Buffer.from(events.join(''), 'utf8');
      const chunks = chunkBytes !== undefined ? splitBytes(body, chunkBytes) : Buffer.isBuffer(events) ? [events] : events;
      if (await writeChunks(exchange, chunks, delayMs)) exchange.response.end();
    };
  },

  /**
   * llama-server's chat answer: for `stream: true` the recorded stream (with
   * the usage chunk only when `stream_options.include_usage`), else the
   * recorded completion.
   */
  chat(): FakeReply {
    const withUsage = replies.fixture('chat_stream');
    const withoutUsage = replies.fixture('chat_stream_no_usage');
    const completion = replies.fixture('chat_nonstream');
    return (exchange) => {
      const body = requestJson(exchange.request);
      if (body['stream'] !== true) return completion(exchange);
      const streamOptions = body['stream_options'];
      const includeUsage = typeof streamOptions === 'object' && streamOptions !== null && (streamOptions as Record<string, unknown>)['include_usage'] === true;
      return (includeUsage ? withUsage : withoutUsage)(exchange);
    };
  },

  /** Writes `eventsBefore` events of the recorded stream, then resets the connection. */
  resetMidStream(options: { eventsBefore?: number; events?: readonly string[] } = {}): FakeReply {
    const { eventsBefore = 3, events = rawEvents(loadFixture('chat_stream').body) } = options;
    return async (exchange) => {
      exchange.response.writeHead(200, { 'content-type': 'text/event-stream' });
      exchange.response.flushHeaders();
      if (!(await writeChunks(exchange, events.slice(0, eventsBefore), 0))) return;
      await sleep(20);
      exchange.response.socket?.resetAndDestroy();
    };
  },

  /** Sends the headers and `eventsBefore` events, then nothing, until the client goes away. */
  stall(options: { eventsBefore?: number } = {}): FakeReply {
    const { eventsBefore = 1 } = options;
    return async (exchange) => {
      exchange.response.writeHead(200, { 'content-type': 'text/event-stream' });
      exchange.response.flushHeaders();
      await writeChunks(exchange, rawEvents(loadFixture('chat_stream').body).slice(0, eventsBefore), 0);
      await waitForAbort(exchange.signal);
    };
  },

  /** Waits `delayMs` (or until the client leaves) before answering with `then`. */
  slowHeaders(delayMs: number, then: FakeReply = replies.chat()): FakeReply {
    return async (exchange) => {
      await Promise.race([sleep(delayMs), waitForAbort(exchange.signal)]);
      if (exchange.signal.aborted) return;
      await then(exchange);
    };
  },

  /** What a reverse proxy in front of the model says when it is down. */
  htmlError(status = 502): FakeReply {
    return ({ response }) => {
      const page = `<html><head><title>${status} Bad Gateway</title></head><body><center><h1>${status} Bad Gateway</h1></center><hr><center>nginx</center></body></html>\n`;
      response.writeHead(status, { 'content-type': 'text/html', 'content-length': String(Buffer.byteLength(page)) });
      response.end(page);
    };
  },

  /** Closes the connection without an answer. */
  hangUp(): FakeReply {
    return ({ response }) => {
      response.socket?.destroy();
    };
  },
};

/** A non-streamed chat answer as the llama-server doubles write it: usage with its cached tokens, and `timings`. */
export function chatCompletionBody(options: { id: string; answer: string; usage: { prompt_tokens: number; completion_tokens: number }; cachedTokens: number; timings: Record<string, number> }): Record<string, unknown> {
  const { usage } = options;
  return {
    id: options.id,
    object: 'chat.completion',
    created: 1795997435,
    model: 'sim',
    choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: options.answer } }],
    usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens, prompt_tokens_details: { cached_tokens: options.cachedTokens } },
    timings: options.timings,
  };
}
