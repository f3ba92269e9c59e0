import type { CompactionLogger } from '../ports.js';
import type { Epoch, EpochLease, EpochLookup, EpochStore, LookupOptions, SharedReads, SharedState, UnsharedMeasures } from '../types.js';
import type { MemoryEpochStore } from './epoch-store.js';
import { isBeyond } from './lookup.js';

/**
 * Degrading to memory, for any shared store: this process's memory store
 * sits behind the shared one, every epoch saved or found is kept there too,
 * so when the shared store is down, slow or flushed the replica goes on with
 * what it knows (warned once per outage, counted), and a conversation it
 * served keeps its forwarded prefix. No call ever fails a request: a command
 * that rejects is answered from memory.
 *
 * A shared store (redis-store.ts) only says what its commands answered, or
 * rejects; this class alone decides what a fault means.
 */

export type StoreOperation = 'lookup' | 'load' | 'save' | 'lease' | 'ratio' | 'backoff';

/** What a lookup read from the shared store, not yet checked against the history. */
export interface SharedLookup {
  readonly inUse: Epoch | undefined;
  readonly pending: Epoch | undefined;
  readonly shared?: SharedState;
  /** The lease of a prefix beyond the epoch in use that another replica is summarizing, when there is one. */
  readonly runningElsewhere?: string;
}

/** A lease as the shared store holds it: its calls reject when the store cannot be reached. */
export interface SharedLease {
  /** False when the lease was lost (expired and taken by another replica). */
  renew(): Promise<boolean>;
  release(): Promise<void>;
}

/** A store shared by replicas, seen as plain commands: each resolves with the answer or rejects (a fault). */
export interface SharedEpochs {
  /** Whether commands can be sent now; while not, each is a fault without being tried. */
  readonly ready: boolean;
  /** Called each time the connection is (re)established. */
  onReady(listener: () => void): void;
  /** Where it is (host:port, never a URL with its password) and why it is not ready, for the warning of an outage. */
  whyNotReady?(): string;
  /**
   * Settles on the process's first connection, or when waiting for it is
   * given up: before it a replica knows no epoch at all, so its first
   * commands wait rather than answer from an empty memory (issue 27).
   */
  firstConnection?(): Promise<void>;
  /** `patient`: a longer bound than the usual one (see {@link LookupOptions}). */
  lookup(hashes: readonly string[], shared?: SharedReads, options?: LookupOptions): Promise<SharedLookup>;
  shareRatio(measures: UnsharedMeasures): Promise<void>;
  noteFailure(conversation: string, ms: number): Promise<void>;
  /** Ends the conversation's back-off for every replica. */
  clearFailure?(conversation: string): Promise<void>;
  /** The commands as one conversation sends them (on a cluster: its keys carry its hash tag). */
  forConversation?(conversation: string): SharedEpochs;
  load(key: string): Promise<Epoch | undefined>;
  save(epoch: Epoch, ttlMs: number): Promise<void>;
  /** Null while another replica holds the lease. */
  lease(key: string, ttlMs: number): Promise<SharedLease | null>;
  close(): Promise<void>;
}

export interface MemoryFallbackOptions {
  /** The TTL of an epoch in the shared store. */
  readonly ttlMs: number;
  readonly memory: MemoryEpochStore;
  readonly logger?: CompactionLogger | undefined;
  /** Told of each command that failed (the metrics). */
  readonly onFault?: ((operation: StoreOperation) => void) | undefined;
  readonly now?: () => number;
  /** Named in the outage's log lines. */
  readonly name: string;
}

/** A lease nobody else can hold: the shared store is unreachable, so this replica computes on its own (its single flight still joins its own callers). */
const OWN_LEASE: EpochLease = { renew: async () => true, release: async () => undefined };

/** What a store and its per-conversation views share: whether the last command failed (the outage is warned once, and its end said once). */
interface Health {
  faulty: boolean;
}

export class MemoryFallbackStore implements EpochStore {
  readonly #shared: SharedEpochs;
  readonly #memory: MemoryEpochStore;
  readonly #options: MemoryFallbackOptions;
  readonly #now: () => number;
  readonly #health: Health;

  constructor(shared: SharedEpochs, options: MemoryFallbackOptions, health?: Health) {
    this.#shared = shared;
    this.#options = options;
    this.#memory = options.memory;
    this.#now = options.now ?? Date.now;
    this.#health = health ?? { faulty: false };
    if (health === undefined) shared.onReady(() => this.#recovered());
  }

  /** The store as one conversation uses it: the shared store's view of it, the same memory and the same outage. */
  forConversation(conversation: string): MemoryFallbackStore {
    const view = this.#shared.forConversation?.(conversation);
    return view === undefined ? this : new MemoryFallbackStore(view, this.#options, this.#health);
  }

  /** Epochs held in this process's memory (the shared store counts its own). */
  get size(): number {
    return this.#memory.size;
  }

  get bytes(): number {
    return this.#memory.bytes;
  }

  /** Whether the replica is working from memory now (the shared store down, or its last command failed). */
  get degraded(): boolean {
    return this.#health.faulty || !this.#shared.ready;
  }

  async lookup(hashes: readonly string[], shared?: SharedReads, options: LookupOptions = {}): Promise<EpochLookup> {
    const local = await this.#memory.lookup(hashes);
    const reply = await this.#call('lookup', () => this.#shared.lookup(hashes, shared, options));
    if (reply === undefined) return { ...local, degraded: true };
    const state = shared === undefined || reply.shared === undefined ? {} : { shared: reply.shared };
    const matches = (epoch: Epoch | undefined): epoch is Epoch => epoch !== undefined && hashes[epoch.seenLength] === epoch.key;
    let inUse = matches(reply.inUse) ? reply.inUse : null;
    // Memory knows a longer one: the shared store was flushed or restarted empty. It is written back, so other replicas find it again.
    if (local.inUse !== null && (inUse === null || local.inUse.seenLength > inUse.seenLength)) {
      inUse = local.inUse;
      void this.save(inUse);
    } else if (inUse !== null) {
      this.#memory.set(inUse);
    }
    const pending = matches(reply.pending) && isBeyond(reply.pending, inUse) ? reply.pending : local.pending;
    const running = reply.runningElsewhere === undefined || pending !== null ? {} : { runningElsewhere: reply.runningElsewhere };
    return { inUse, pending, ...state, ...running };
  }

  async shareRatios(measures: readonly UnsharedMeasures[]): Promise<void> {
    // Sent together: a pipelining client writes them to the socket in one go, one round trip for all.
    await Promise.all(measures.map((measure) => this.#call('ratio', () => this.#shared.shareRatio(measure))));
  }

  async noteFailure(conversation: string, ms: number): Promise<void> {
    await this.#call('backoff', () => this.#shared.noteFailure(conversation, ms));
  }

  async clearFailure(conversation: string): Promise<void> {
    const clear = this.#shared.clearFailure;
    if (clear === undefined) return;
    await this.#call('backoff', () => clear.call(this.#shared, conversation));
  }

  async load(key: string): Promise<Epoch | undefined> {
    return (await this.#call('load', () => this.#shared.load(key))) ?? this.#memory.get(key);
  }

  async save(epoch: Epoch): Promise<void> {
    this.#memory.set(epoch);
    const ttl = epoch.expiresAt === undefined ? this.#options.ttlMs : Math.min(this.#options.ttlMs, epoch.expiresAt - this.#now());
    if (ttl <= 0) return;
    await this.#call('save', () => this.#shared.save(epoch, ttl));
  }

  async lease(key: string, ttlMs: number): Promise<EpochLease | null> {
    const taken = await this.#call('lease', async () => ({ lease: await this.#shared.lease(key, ttlMs) }));
    if (taken === undefined) return OWN_LEASE;
    const { lease } = taken;
    if (lease === null) return null;
    return {
      // A renewal that could not be made keeps the lease: the summary runs on rather than be thrown away.
      renew: async () => (await this.#call('lease', () => lease.renew())) !== false,
      release: async () => {
        await this.#call('lease', () => lease.release());
      },
    };
  }

  async close(): Promise<void> {
    await this.#shared.close();
  }

  /** Runs one command; undefined when it failed or timed out (counted, the outage warned once). */
  async #call<T>(operation: StoreOperation, command: () => Promise<T>): Promise<T | undefined> {
    if (!this.#shared.ready && this.#shared.firstConnection !== undefined) await this.#shared.firstConnection();
    if (!this.#shared.ready) {
      this.#fault(operation, this.#shared.whyNotReady?.() ?? 'not connected');
      return undefined;
    }
    try {
      const result = await command();
      if (this.#health.faulty) this.#recovered();
      return result;
    } catch (error) {
      this.#fault(operation, error instanceof Error ? error.message : String(error));
      return undefined;
    }
  }

  #fault(operation: StoreOperation, reason: string): void {
    this.#options.onFault?.(operation);
    if (this.#health.faulty) return;
    this.#health.faulty = true;
    this.#options.logger?.warn({ store: this.#options.name, operation, reason }, 'epoch store unavailable: using this replica\'s memory until it is back');
  }

  #recovered(): void {
    if (!this.#health.faulty) return;
    this.#health.faulty = false;
    this.#options.logger?.info({ store: this.#options.name }, 'epoch store back: epochs are shared again');
  }
}
