import { LRUCache } from 'lru-cache';
import type { Epoch, EpochLookup } from '../types.js';
import { lookupEpochs } from './lookup.js';
import { messageBytes, SharedMessages } from './shared-messages.js';

export interface MemoryEpochStoreOptions {
  readonly maxEntries?: number;
  /** What the epochs held may cost, in bytes about (their messages' JSON and overhead, a shared message once). */
  readonly maxBytes?: number;
  readonly ttlMs?: number;
  readonly now?: () => number;
}

/** An epoch as held in memory: its large messages replaced by the shared copies, and what it costs. */
interface Held {
  readonly epoch: Epoch;
  /** Its own bytes: its small messages, strings and references to shared ones. */
  readonly bytes: number;
  /** The keys of the shared messages it holds. */
  readonly shared: readonly string[];
}

/** A reference to a shared message, and an epoch's own fields (key, notes, report, indexes), about. */
const REFERENCE_BYTES = 64;
const EPOCH_OVERHEAD_BYTES = 512;

/**
 * Epochs in memory: least recently used first out beyond `maxEntries` or
 * `maxBytes`, and dropped `ttlMs` after they were set (a read does not
 * extend it; a truncation's `expiresAt` ends it sooner). The LRU and the
 * expiry are lru-cache's. A large message many epochs hold alike (the head of
 * one agent's conversations) is held once (`SharedMessages`) and counted
 * once against `maxBytes`.
 *
 * Every replica has one: alone it is the store (`cache.store: memory`), and
 * behind a shared store it is what the replica goes on with when that one is
 * down (repository.ts decides which answers).
 */
export class MemoryEpochStore {
  readonly #entries: LRUCache<string, Held>;
  readonly #shared = new SharedMessages();
  readonly #maxBytes: number;
  readonly #ttlMs: number;
  readonly #now: () => number;

  constructor({ maxEntries = 10_000, maxBytes = 128 * 1024 * 1024, ttlMs = 86_400_000, now = Date.now }: MemoryEpochStoreOptions = {}) {
    this.#ttlMs = ttlMs;
    this.#now = now;
    this.#maxBytes = maxBytes;
    this.#entries = new LRUCache<string, Held>({
      max: maxEntries,
      // Each entry's own bytes; the shared messages' bytes are added in #evictBeyondBytes.
      maxSize: maxBytes,
      sizeCalculation: (held) => Math.max(1, held.bytes),
      dispose: (held) => {
        for (const key of held.shared) this.#shared.release(key);
      },
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

  /** What the epochs held cost, in bytes about: each one's own, and each shared message once. */
  get bytes(): number {
    return this.#entries.calculatedSize + this.#shared.bytes;
  }

  get(key: string): Epoch | undefined {
    return this.#entries.get(key)?.epoch;
  }

  set(epoch: Epoch): void {
    const ttl = epoch.expiresAt === undefined ? this.#ttlMs : Math.min(this.#ttlMs, epoch.expiresAt - this.#now());
    // An epoch already expired is not stored at all (lru-cache reads a ttl of 0 as "no expiry").
    if (ttl <= 0) {
      this.#entries.delete(epoch.key);
      return;
    }
    this.#entries.set(epoch.key, this.#hold(epoch), { ttl: Math.max(1, ttl - 1) });
    this.#evictBeyondBytes();
  }

  /** The epoch with its large messages shared, and its own cost. */
  #hold(epoch: Epoch): Held {
    const shared: string[] = [];
    let bytes = EPOCH_OVERHEAD_BYTES + epoch.key.length + epoch.report.length + (epoch.notes?.length ?? 0);
    const replacement = epoch.replacement.map((message) => {
      const copy = this.#shared.share(message);
      if (copy === null) {
        bytes += messageBytes(message);
        return message;
      }
      shared.push(copy.key);
      bytes += REFERENCE_BYTES;
      return copy.message;
    });
    // Nothing shared: the epoch is held as it came (the same object a caller saved).
    return { epoch: shared.length === 0 ? epoch : { ...epoch, replacement }, bytes, shared };
  }

  /** Shared messages count too: drop the least recently used epochs until the whole fits `maxBytes`. */
  #evictBeyondBytes(): void {
    while (this.bytes > this.#maxBytes && this.#entries.size > 0) this.#entries.pop();
  }

  delete(key: string): void {
    this.#entries.delete(key);
  }

  /** The epochs for a history whose prefix hashes are `hashes`; stale pending ones found on the way are dropped. */
  lookup(hashes: readonly string[]): EpochLookup {
    if (this.#entries.size === 0) return { inUse: null, pending: null };
    return lookupEpochs((key) => this.get(key), hashes, (stale) => this.delete(stale.key));
  }
}
