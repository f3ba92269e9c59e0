import type { CallHeaders, JsonReply, UpstreamJson } from '../../src/compaction/upstream-json.js';

/** What a fake route answers: a reply, an error to throw, or a function of the request body. */
export type FakeRoute = JsonReply | Error | ((body: unknown) => JsonReply | Promise<JsonReply>);

/**
 * A small scripted UpstreamJson: each `METHOD path` answers from `routes`
 * (404 for the others) and every call is recorded, so tests can count them.
 */
export class FakeUpstream implements UpstreamJson {
  readonly calls: Array<{ method: 'GET' | 'POST'; path: string; body?: unknown; headers?: CallHeaders }> = [];

  constructor(public routes: Record<string, FakeRoute> = {}) {}

  count(method: 'GET' | 'POST', path: string): number {
    return this.calls.filter((call) => call.method === method && call.path === path).length;
  }

  getJson(path: string, _signal?: AbortSignal, headers?: CallHeaders): Promise<JsonReply> {
    this.calls.push({ method: 'GET', path, ...(headers === undefined ? {} : { headers }) });
    return this.#answer(`GET ${path}`, undefined);
  }

  postJson(path: string, body: unknown, _signal?: AbortSignal, headers?: CallHeaders): Promise<JsonReply> {
    this.calls.push({ method: 'POST', path, body, ...(headers === undefined ? {} : { headers }) });
    return this.#answer(`POST ${path}`, body);
  }

  async #answer(route: string, body: unknown): Promise<JsonReply> {
    const answer = this.routes[route];
    if (answer === undefined) return { status: 404, body: { error: { message: 'File Not Found' } } };
    if (answer instanceof Error) throw answer;
    return typeof answer === 'function' ? answer(body) : answer;
  }
}

/** A clock the test moves by hand. */
export function manualClock(start = 1_000_000): { now: () => number; advance: (milliseconds: number) => void } {
  let time = start;
  return { now: () => time, advance: (milliseconds) => (time += milliseconds) };
}
