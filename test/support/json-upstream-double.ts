import type { JsonReply, UpstreamJson } from '../../src/upstream/json-surface.js';
import type { CallHeaders } from '../../src/compaction/ports.js';

/** What a route answers: a reply, an error to throw, or a function of the request body (and headers). */
export type JsonRoute = JsonReply | Error | ((body: unknown, headers: CallHeaders | undefined) => JsonReply | Promise<JsonReply>);

export interface JsonCall {
  readonly method: 'GET' | 'POST';
  readonly path: string;
  readonly body?: unknown;
  readonly headers?: CallHeaders;
}

/**
 * An in-process `UpstreamJson` (the JSON calls compaction makes: window,
 * exact counts, summaries), for tests that need no socket; the loopback HTTP
 * double is `FakeUpstream`. Each `METHOD path` answers from `routes` (404 for
 * the others, as llama-server does) and every call is recorded, so tests can
 * count them.
 */
export class JsonUpstreamDouble implements UpstreamJson {
  readonly calls: JsonCall[] = [];

  constructor(public routes: Record<string, JsonRoute> = {}) {}

  /**
   * A llama-server as compaction sees it: `/props` answers `window` (no route
   * when null); the exact-count endpoint answers `countTokens` of the body when
   * given, else 404.
   */
  static llamaServer(options: { window?: number | null; countTokens?: (body: Record<string, unknown>) => number } = {}): JsonUpstreamDouble {
    const { window = 8192, countTokens } = options;
    const routes: Record<string, JsonRoute> = {};
    if (window !== null) routes['GET /props'] = { status: 200, body: { default_generation_settings: { n_ctx: window } } };
    if (countTokens !== undefined) {
      routes['POST /v1/chat/completions/input_tokens'] = (body) => ({ status: 200, body: { input_tokens: countTokens(body as Record<string, unknown>) } });
    }
    return new JsonUpstreamDouble(routes);
  }

  count(method: 'GET' | 'POST', path: string): number {
    return this.calls.filter((call) => call.method === method && call.path === path).length;
  }

  getJson(path: string, _signal?: AbortSignal, headers?: CallHeaders): Promise<JsonReply> {
    this.calls.push({ method: 'GET', path, ...(headers === undefined ? {} : { headers }) });
    return this.#answer(`GET ${path}`, undefined, headers);
  }

  postJson(path: string, body: unknown, _signal?: AbortSignal, headers?: CallHeaders): Promise<JsonReply> {
    this.calls.push({ method: 'POST', path, body, ...(headers === undefined ? {} : { headers }) });
    return this.#answer(`POST ${path}`, body, headers);
  }

  async #answer(route: string, body: unknown, headers: CallHeaders | undefined): Promise<JsonReply> {
    const answer = this.routes[route];
    if (answer === undefined) return { status: 404, body: { error: { message: 'File Not Found' } } };
    if (answer instanceof Error) throw answer;
    return typeof answer === 'function' ? answer(body, headers) : answer;
  }
}
