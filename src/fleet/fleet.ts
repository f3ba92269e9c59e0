import type { FleetServer } from './fleet-server.js';
import { serverOrder } from './home-choice.js';

/**
 * A fleet of upstream servers behind one compactor (issue 39): each
 * conversation (its key, slots/conversation-key.ts, the epochs' name for it)
 * has a home server, chosen once (home-choice.ts) and kept while the server
 * is healthy, so its KV cache stays where its prefix was read. Servers are
 * asked `/health` every `intervalMs`; one that stops answering (or fails a
 * request before answering) is taken out: its conversations choose a new
 * home on their next request and read their prefix there once. One that
 * answers again takes new conversations again.
 *
 * One server is no fleet: the app builds none, and a request goes as it did
 * before there were fleets.
 */

export interface FleetLog {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
}

/** Where the homes are kept beyond this process (the store, shared by replicas: home-store.ts); this process's map alone when absent. */
export interface SharedHomes {
  /** The server a conversation calls home (its label: replicas may list their servers in another order), or null (none, or the store did not answer). */
  get(key: string): Promise<string | null>;
  set(key: string, server: string): void;
}

export interface FleetOptions {
  readonly servers: readonly FleetServer[];
  readonly intervalMs: number;
  readonly log?: FleetLog;
  readonly shared?: SharedHomes;
  /** Homes remembered at most (the least recently used is forgotten: it chooses anew, as after a restart). */
  readonly maxHomes?: number;
}

// A probe longer than this is no answer: a loaded server still answers /health at once.
const PROBE_TIMEOUT_MS = 2_000;
// A model list is a small JSON answer.
const MODELS_TIMEOUT_MS = 5_000;

export class Fleet {
  readonly servers: readonly FleetServer[];
  readonly #options: FleetOptions;
  readonly #homes = new Map<string, FleetServer>();
  readonly #homeCounts: number[];
  #timer: NodeJS.Timeout | null = null;
  #round: Promise<void> | null = null;
  readonly #roundWaiters: Array<() => void> = [];

  constructor(options: FleetOptions) {
    this.servers = options.servers;
    this.#options = options;
    this.#homeCounts = options.servers.map(() => 0);
  }

  /**
   * The servers to try for a request of conversation `key` (null: none, a
   * guest call) on `model`, its home first; each after the first only when
   * the one before failed before answering.
   */
  async order(key: string | null, model: string): Promise<FleetServer[]> {
    let home = key === null ? undefined : this.#homes.get(key);
    if (home === undefined && key !== null && this.#options.shared !== undefined) {
      const label = await this.#options.shared.get(key);
      home = label === null ? undefined : this.servers.find((server) => server.label === label);
    }
    const listed = this.servers.some((server) => server.healthy && server.serves(model) === true);
    const loads = this.servers.map((server) => ({
      index: server.index,
      healthy: server.healthy,
      // Nobody lists the model: every server may (a single-model llama-server answers any name).
      serves: !listed || server.serves(model) === true,
      freeSlots: server.freeSlots,
      queued: server.queued,
      homes: this.#homeCounts[server.index]!,
      weight: server.weight,
    }));
    const order = serverOrder(loads, home?.index ?? null).map((index) => this.servers[index]!);
    // Claimed at once: conversations that start side by side see each other's choice, and spread.
    if (key !== null && home !== order[0]) this.#setHome(key, order[0]!);
    return order;
  }

  /** A conversation's request was answered by `server`: its home from now on (a new one, or after its old home failed). */
  answered(key: string | null, server: FleetServer): void {
    if (key !== null) this.#setHome(key, server);
  }

  #setHome(key: string, server: FleetServer): void {
    const old = this.#homes.get(key);
    if (old !== undefined) {
      this.#homes.delete(key);
      this.#homeCounts[old.index]!--;
    }
    this.#homes.set(key, server);
    this.#homeCounts[server.index]!++;
    if (old !== server) this.#options.shared?.set(key, server.label);
    const max = this.#options.maxHomes ?? 100_000;
    if (this.#homes.size > max) {
      const [oldestKey, oldest] = this.#homes.entries().next().value!;
      this.#homes.delete(oldestKey);
      this.#homeCounts[oldest.index]!--;
    }
  }

  /** Each server as the dashboard's servers table shows it. */
  rows(): Array<{ server: string; up: boolean; conversations: number; queued: number; slotsInUse: number; requests: number; failures: number }> {
    return this.servers.map((server) => ({
      server: server.label,
      up: server.healthy,
      conversations: this.homesOn(server),
      queued: server.queued,
      slotsInUse: server.slotsInUse,
      requests: server.counters.requests,
      failures: server.counters.failures,
    }));
  }

  /** Conversations that call `server` home (the dashboard, metrics). */
  homesOn(server: FleetServer): number {
    return this.#homeCounts[server.index]!;
  }

  /** A request to `server` failed before any answer byte: it is taken out until a probe finds it answering. */
  failed(server: FleetServer, reason: string): void {
    server.counters.failures++;
    this.#takeOut(server, reason);
  }

  /** The first healthy server (else the first): for calls that belong to no conversation (window lookups, pass-through). */
  any(): FleetServer {
    return this.servers.find((server) => server.healthy) ?? this.servers[0]!;
  }

  /** Starts probing every `intervalMs` (one round at once). */
  start(): void {
    if (this.#timer !== null) return;
    void this.probe();
    this.#timer = setInterval(() => void this.probe(), this.#options.intervalMs);
    this.#timer.unref();
  }

  /** Asks every server `/health` once (a round already running is joined); resolves when each answered or timed out. */
  probe(): Promise<void> {
    this.#round ??= Promise.all(this.servers.map((server) => this.#probeOne(server))).then(() => {
      this.#round = null;
      for (const waiter of this.#roundWaiters.splice(0)) waiter();
    });
    return this.#round;
  }

  /** Resolves after the next probe round that starts from now has ended (tests, the doctor). */
  nextRound(): Promise<void> {
    return new Promise((resolve) => {
      if (this.#round === null) void this.probe().then(resolve);
      else this.#roundWaiters.push(() => void this.probe().then(resolve));
    });
  }

  stop(): void {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
  }

  async #probeOne(server: FleetServer): Promise<void> {
    const health = await server.client.health({ timeoutMs: PROBE_TIMEOUT_MS });
    if (!health.ready) {
      this.#takeOut(server, health.status === null ? 'no answer to /health' : `/health answered ${health.status}`);
      return;
    }
    if (!server.healthy) {
      server.healthy = true;
      server.counters.broughtBack++;
      this.#options.log?.info({ upstream: server.label }, 'fleet: the server answers /health again; it takes new conversations');
    }
    if (!server.modelsConfigured && server.models === null) server.models = await modelsOf(server);
  }

  #takeOut(server: FleetServer, reason: string): void {
    if (!server.healthy) return;
    server.healthy = false;
    server.counters.takenOut++;
    this.#options.log?.warn({ upstream: server.label, reason }, 'fleet: the server was taken out; its conversations move to another on their next request');
  }
}

/** The model names a server lists at `/v1/models` (OpenAI's `data[].id`; llama-server lists its alias or file), or null when it does not say. */
async function modelsOf(server: FleetServer): Promise<ReadonlySet<string> | null> {
  const answer = await server.client.getJson('/v1/models', { timeoutMs: MODELS_TIMEOUT_MS }).catch(() => undefined);
  const data = typeof answer === 'object' && answer !== null ? (answer as { data?: unknown }).data : undefined;
  if (!Array.isArray(data)) return null;
  const ids = data.map((entry: unknown) => (typeof entry === 'object' && entry !== null ? (entry as { id?: unknown }).id : undefined)).filter((id): id is string => typeof id === 'string');
  return ids.length === 0 ? null : new Set(ids);
}
