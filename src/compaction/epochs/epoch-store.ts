import { LRUCache } from 'lru-cache';
import type { ChatMessage } from '../../transcript/message.js';
import type { Tier } from '../plan.js';
import type { UnsharedMeasures } from '../token-ratio.js';
import { lookupEpochs } from './lookup.js';
import { messageBytes, SharedMessages } from './shared-messages.js';

/** How the history before an epoch's cut is forwarded: by a tier, or truncated when its summary failed. */
export type EpochStrategy = Tier | 'truncated';

/**
 * "The first `sourceLength` original messages of this conversation are
 * forwarded as `replacement`", for a history that begins with the first
 * `seenLength` messages its text was written from (whose prefix hash is `key`).
 */
export interface Epoch {
  /** The prefix hash of the first `seenLength` original messages: `hashes[seenLength]`. */
  readonly key: string;
  readonly sourceLength: number;
  /**
   * How many original messages the replacement's text was written from
   * (≥ `sourceLength`): a suffix-mode summary sees the whole history, kept
   * turns included, and may carry them, so the epoch applies only to a
   * history that contains everything its summary request saw. A growing
   * conversation keeps it; a branch (an edited or regenerated message,
   * another user sharing a preamble) does not.
   */
  readonly seenLength: number;
  readonly replacement: readonly ChatMessage[];
  /**
   * The indexes of `replacement` that compactor wrote (the summary pair, a
   * truncation notice, the message leading with steps notes): the only
   * places a mark is genuine. Absent: none. Text elsewhere that starts like a
   * mark is a client's, and ordinary content.
   */
  readonly marked?: readonly number[];
  /** The notes text, kept so a later epoch merges from it without parsing messages; null when there are none. */
  readonly notes: string | null;
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

/** What a history's prefix hashes find: the epoch in use of the longest prefix that has one, and the longest pending epoch beyond it. */
export interface EpochLookup {
  readonly inUse: Epoch | null;
  readonly pending: Epoch | null;
  /** What a shared store read with the epochs (same round trip), when asked and reachable. */
  readonly shared?: SharedState;
}

/** What a lookup also reads from a shared store: the state replicas learn from one another. */
export interface SharedReads {
  /** The tenant's model, named as `sharedRatioName` does. */
  readonly ratio: string;
  /** The conversation, named as the back-off names it. */
  readonly conversation: string;
}

export interface SharedState {
  /** The token ratio every replica's measures made, when one was shared. */
  readonly ratio: number | undefined;
  /** How long a summary failure of the conversation still holds back its summary (ms; 0: none). */
  readonly backoffMs: number;
}

/** The right to compute the epoch of one key, held by one replica at a time (see `leased`). */
export interface EpochLease {
  /** Extends the lease while the summary runs; false when it was lost (expired and taken). */
  renew(): Promise<boolean>;
  release(): Promise<void>;
}

/**
 * Where epochs live: this process's memory, or a store shared by replicas
 * (Redis, Valkey). Asynchronous, so a shared store answers a lookup in one
 * round trip; every call is made past the fast path only.
 */
export interface EpochStore {
  /** The epochs for a history whose prefix hashes are `hashes` (`hashes[i]` names the first `i` messages): one round trip. */
  lookup(hashes: readonly string[], shared?: SharedReads): Promise<EpochLookup>;
  /** A shared store merges these measures into its ratios (off the request path); absent in memory. */
  shareRatios?(measures: readonly UnsharedMeasures[]): Promise<void>;
  /** A shared store holds the conversation's summary back for `ms` on every replica; absent in memory. */
  noteFailure?(conversation: string, ms: number): Promise<void>;
  /** The epoch stored under `key`, in use or pending. */
  load(key: string): Promise<Epoch | undefined>;
  save(epoch: Epoch): Promise<void>;
  /** Takes the lease on computing `key` for `ttlMs`; null while another replica holds it. */
  lease(key: string, ttlMs: number): Promise<EpochLease | null>;
  /** Epochs held in this process (a shared store's are counted by the store itself). */
  readonly size: number;
  /** What the epochs held in this process cost, in bytes about. */
  readonly bytes: number;
}

/** A lease nobody else can hold: within one process the engine's single flight already makes one call per key. */
const LOCAL_LEASE: EpochLease = { renew: async () => true, release: async () => undefined };

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
 */
export class MemoryEpochStore implements EpochStore {
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
