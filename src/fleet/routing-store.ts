import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { RedisConnection } from '../compaction/epochs/redis-connection.js';
import { RELEASE_SCRIPT, RENEW_SCRIPT } from '../compaction/epochs/redis-store.js';
import type { SlotLeases } from '../slots/slot-leases.js';
import type { FleetLog, SharedHomes } from './fleet.js';

/**
 * Where replicas agree on routing (issue 39), in the Redis (or Valkey) the
 * epochs use: each conversation's home server (`fleet:home:KEY`), and a
 * lease per llama-server slot (`fleet:slot:SERVER:MODEL:SLOT`, `SET NX PX`
 * with a token, renewed while held, released by its holder only), so two
 * replicas never put two requests into one slot. A store that does not
 * answer in `timeoutMs` lends no answer: the home is this replica's own, the
 * slot this replica's alone (as without a store); the first fault of an
 * outage is told once.
 */

export interface RoutingStoreOptions {
  readonly urls: readonly string[];
  readonly cluster: boolean;
  readonly keyPrefix: string;
  readonly timeoutMs: number;
  /** How long a home is remembered without use (cache.ttl_s). */
  readonly homeTtlMs: number;
  readonly log?: FleetLog;
}

/** A holder that died frees its slot this long after its last renewal; renewed every third of it. */
const LEASE_MS = 10_000;
/** How often a request waiting for a slot another replica holds looks again: a turn takes far longer. */
const POLL_MS = 10;

export class RedisRoutingStore implements SharedHomes, SlotLeases {
  readonly #options: RoutingStoreOptions;
  #opened: RedisConnection | null = null;
  #down = false;

  constructor(options: RoutingStoreOptions) {
    this.#options = options;
  }

  /** Connected on first use: a server of one slot, or a lone server with no fleet, never asks, and never holds a connection. */
  get #connection(): RedisConnection {
    if (this.#opened !== null) return this.#opened;
    const { urls, cluster, timeoutMs } = this.#options;
    const connection = new RedisConnection({
      urls,
      cluster,
      timeoutMs,
      scripts: { slotLeaseRenew: { lua: RENEW_SCRIPT, numberOfKeys: 1 }, slotLeaseRelease: { lua: RELEASE_SCRIPT, numberOfKeys: 1 } },
    });
    connection.onReady(() => {
      if (this.#down) this.#options.log?.info({}, 'fleet: the store answers again; replicas share homes and slot leases again');
      this.#down = false;
    });
    this.#opened = connection;
    return connection;
  }

  async get(key: string): Promise<string | null> {
    try {
      await this.#connection.firstConnection();
      // Patient: an answer missed here puts the conversation on another server, where its whole history is read again.
      return await this.#connection.run(() => this.#connection.client.get(this.#homeKey(key)), { patient: true });
    } catch (error) {
      this.#fault(error);
      return null;
    }
  }

  set(key: string, server: string): void {
    void this.#connection.run(() => this.#connection.client.set(this.#homeKey(key), server, 'PX', this.#options.homeTtlMs)).catch((error: unknown) => this.#fault(error));
  }

  async take(name: string, signal?: AbortSignal): Promise<() => void> {
    const key = `${this.#options.keyPrefix}fleet:slot:${name}`;
    const token = randomUUID();
    const client = this.#connection.client as unknown as {
      set(key: string, value: string, px: 'PX', ms: number, nx: 'NX'): Promise<string | null>;
      slotLeaseRenew(key: string, token: string, ms: number): Promise<number>;
      slotLeaseRelease(key: string, token: string): Promise<number>;
    };
    for (;;) {
      signal?.throwIfAborted();
      let taken: string | null;
      try {
        await this.#connection.firstConnection();
        // Patient: a lease given up for a slow answer sends a request into a slot another replica may be using.
        taken = await this.#connection.run(() => client.set(key, token, 'PX', LEASE_MS, 'NX'), { patient: true });
      } catch (error) {
        // No store: this replica's own slot queue is all there is.
        this.#fault(error);
        return () => undefined;
      }
      if (taken === 'OK') break;
      await sleep(POLL_MS, undefined, signal === undefined ? {} : { signal });
    }
    const renewal = setInterval(() => void this.#connection.run(() => client.slotLeaseRenew(key, token, LEASE_MS)).catch((error: unknown) => this.#fault(error)), LEASE_MS / 3);
    renewal.unref();
    return () => {
      clearInterval(renewal);
      void this.#connection.run(() => client.slotLeaseRelease(key, token)).catch((error: unknown) => this.#fault(error));
    };
  }

  close(): void {
    this.#opened?.close();
  }

  #homeKey(key: string): string {
    return `${this.#options.keyPrefix}fleet:home:${key}`;
  }

  #fault(error: unknown): void {
    if (this.#down) return;
    this.#down = true;
    this.#options.log?.warn({ store: this.#connection.host, reason: error instanceof Error ? error.message : String(error) }, 'fleet: the store does not answer; each replica keeps its own homes and slots until it does');
  }
}
