import { LRUCache } from 'lru-cache';
import type { Epoch, EpochLease, EpochLookup, EpochStore } from '../types.js';
import { lookupEpochs } from './lookup.js';

/** A lease nobody else can hold: within one process the engine's single flight already makes one call per key. */
const LOCAL_LEASE: EpochLease = { renew: async () => true, release: async () => undefined };

export interface MemoryEpochStoreOptions {
  readonly maxEntries?: number;
  readonly ttlMs?: number;
  readonly now?: () => number;
}

/**
 * Epochs in memory: least recently used first out beyond `maxEntries`, and
 * dropped `ttlMs` after they were set (a read does not extend it; a
 * truncation's `expiresAt` ends it sooner). The LRU and the expiry are
 * lru-cache's.
 */
export class MemoryEpochStore implements EpochStore {
  readonly #entries: LRUCache<string, Epoch>;
  readonly #ttlMs: number;
  readonly #now: () => number;

  constructor({ maxEntries = 10_000, ttlMs = 86_400_000, now = Date.now }: MemoryEpochStoreOptions = {}) {
    this.#ttlMs = ttlMs;
    this.#now = now;
    this.#entries = new LRUCache<string, Epoch>({
      max: maxEntries,
      // lru-cache keeps an entry while its age is at most `ttl`; an epoch is gone once its age reaches `ttlMs`.
      ttl: Math.max(1, ttlMs - 1),
      // Read the clock on every check: the default caches it for 1 ms with a timer per read, which an injected clock cannot follow.
      ttlResolution: 0,
      perf: { now },
    });
  }

  get size(): number {
    return this.#entries.size;
  }

  get(key: string): Epoch | undefined {
    return this.#entries.get(key);
  }

  set(epoch: Epoch): void {
    const ttl = epoch.expiresAt === undefined ? this.#ttlMs : Math.min(this.#ttlMs, epoch.expiresAt - this.#now());
    // An epoch already expired is not stored at all (lru-cache reads a ttl of 0 as "no expiry").
    if (ttl <= 0) {
      this.#entries.delete(epoch.key);
      return;
    }
    this.#entries.set(epoch.key, epoch, { ttl: Math.max(1, ttl - 1) });
  }

  delete(key: string): void {
    this.#entries.delete(key);
  }

  async lookup(hashes: readonly string[]): Promise<EpochLookup> {
    return lookupEpochs(this, hashes);
  }

  async load(key: string): Promise<Epoch | undefined> {
    return this.get(key);
  }

  async save(epoch: Epoch): Promise<void> {
    this.set(epoch);
  }

  async lease(): Promise<EpochLease | null> {
    return LOCAL_LEASE;
  }
}
