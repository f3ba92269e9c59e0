import type { Dispatcher } from 'undici';
import type { ForwardOptions, JsonObject, Upstream, UpstreamResponse } from '../upstream/client.js';
import type { CallOptions } from '../upstream/json-call.js';
import type { Health } from '../upstream/health.js';
import type { Fleet } from './fleet.js';

/**
 * A fleet as the proxy's one upstream, for what belongs to no conversation:
 * pass-through requests (`/v1/models`, `/props`), window lookups, exact
 * counts, `/v1/compact`. Each goes to the first healthy server. Chat turns
 * and summaries do not come here: they go to their conversation's server
 * (exchange/fleet-forward.ts, fleet-chat.ts). Ready while one server is.
 */
export class FleetUpstream implements Upstream {
  readonly #fleet: Fleet;

  constructor(fleet: Fleet) {
    this.#fleet = fleet;
  }

  get activeRequests(): number {
    return this.#fleet.servers.reduce((sum, server) => sum + server.client.activeRequests, 0);
  }

  /** The key of the server the next call goes to (each server may have its own). */
  get apiKey(): string | null {
    return this.#fleet.any().client.apiKey;
  }

  forward(options: ForwardOptions): Promise<UpstreamResponse> {
    return this.#fleet.any().client.forward(options);
  }

  send(options: Parameters<Upstream['send']>[0]): Promise<Dispatcher.ResponseData> {
    return this.#fleet.any().client.send(options);
  }

  answerJson(method: 'GET' | 'POST', path: string, body: unknown, options?: CallOptions): ReturnType<Upstream['answerJson']> {
    return this.#fleet.any().client.answerJson(method, path, body, options);
  }

  getJson(path: string, options?: CallOptions): Promise<unknown> {
    return this.#fleet.any().client.getJson(path, options);
  }

  postJson(path: string, body: unknown, options?: CallOptions): Promise<unknown> {
    return this.#fleet.any().client.postJson(path, body, options);
  }

  complete(body: Readonly<JsonObject>, options?: CallOptions): Promise<JsonObject> {
    return this.#fleet.any().client.complete(body, options);
  }

  /** Ready while one server is: every server asked at once; the first ready one's status, else the first server's. */
  async health(options: { timeoutMs?: number } = {}): Promise<Health> {
    const all = await Promise.all(this.#fleet.servers.map((server) => server.client.health(options)));
    return all.find((health) => health.ready) ?? all[0]!;
  }

  async close(options: { graceMs?: number } = {}): Promise<void> {
    this.#fleet.stop();
    await Promise.all(this.#fleet.servers.map((server) => server.client.close(options)));
  }
}
