import type { ChatMessage } from '../../transcript/message.js';

/** How the history before an epoch's cut is forwarded (see DESIGN.md, vocabulary). */
export type EpochStrategy = 'summary' | 'steps' | 'pruned' | 'truncated';

/**
 * "The first `sourceLength` original messages of this conversation, whose
 * prefix hash is `key`, are forwarded as `replacement`."
 */
export interface Epoch {
  readonly key: string;
  readonly sourceLength: number;
  readonly replacement: readonly ChatMessage[];
  /** The notes text, kept so a later epoch merges from it without parsing messages; null when there are none. */
  readonly summary: string | null;
  readonly strategy: EpochStrategy;
  /** The line that reported the compaction that made this epoch. */
  readonly report: string;
  /** Milliseconds since the epoch (clock) after which the entry is dropped early (truncations retry the summary). */
  readonly expiresAt?: number;
  /**
   * Prepared in the background and not applied yet: the raw turns are
   * forwarded as long as they fit, and the first request that crosses the
   * threshold applies this epoch with no waiting.
   */
  readonly pending?: boolean;
}

/** Where epochs live. In memory for now; a shared store can implement the same three calls. */
export interface EpochStore {
  get(key: string): Epoch | undefined;
  set(epoch: Epoch): void;
  delete(key: string): void;
  readonly size: number;
}

export interface MemoryEpochStoreOptions {
  readonly maxEntries?: number;
  readonly ttlMs?: number;
  readonly now?: () => number;
}

interface Entry {
  readonly epoch: Epoch;
  readonly expiresAt: number;
}

/**
 * An LRU map with a time to live. A `Map` keeps insertion order, so moving an
 * entry to the end on every read makes the first key the least recently used.
 */
export class MemoryEpochStore implements EpochStore {
  readonly #entries = new Map<string, Entry>();
  readonly #maxEntries: number;
  readonly #ttlMs: number;
  readonly #now: () => number;

  constructor({ maxEntries = 10_000, ttlMs = 86_400_000, now = Date.now }: MemoryEpochStoreOptions = {}) {
    this.#maxEntries = maxEntries;
    this.#ttlMs = ttlMs;
    this.#now = now;
  }

  get size(): number {
    return this.#entries.size;
  }

  get(key: string): Epoch | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.expiresAt <= this.#now()) {
      this.#entries.delete(key);
      return undefined;
    }
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    return entry.epoch;
  }

  set(epoch: Epoch): void {
    const expiresAt = Math.min(this.#now() + this.#ttlMs, epoch.expiresAt ?? Number.POSITIVE_INFINITY);
    this.#entries.delete(epoch.key);
    this.#entries.set(epoch.key, { epoch, expiresAt });
    while (this.#entries.size > this.#maxEntries) {
      const oldest = this.#entries.keys().next();
      if (oldest.done === true) break;
      this.#entries.delete(oldest.value);
    }
  }

  delete(key: string): void {
    this.#entries.delete(key);
  }
}
