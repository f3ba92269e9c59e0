import { headLength } from '../../transcript/groups.js';
import type { ChatMessage } from '../../transcript/message.js';
import type { CompactionLogger } from '../ports.js';
import type { Epoch, EpochLease, EpochLookup, LookupOptions } from '../types.js';
import type { MemoryEpochStore } from './epoch-store.js';
import { type LeasedOptions, leased } from './lease.js';
import type { SharedLearning } from './learning.js';
import { EpochChoice, isBeyond } from './lookup.js';
import type { SharedStore } from './shared-store.js';
import { StoreHealth, type StoreOperation } from './store-health.js';
import { epochBeneath } from './truncations.js';

/**
 * The epochs repository: the only code that touches a store. The engine, the
 * epoch writer, the background and the observe pass look up, load, save and
 * lease through it, one conversation at a time ({@link EpochRepository.forHistory}:
 * the one place a history is named for the store).
 *
 * Behind it, this process's memory store always, and a shared store
 * (shared-store.ts) when replicas share epochs: every epoch saved or found is
 * kept in memory too, so when the shared store is down, slow or flushed the
 * replica goes on with what it knows (warned once per outage, counted:
 * store-health.ts), and a conversation it served keeps its forwarded prefix.
 * No call ever fails a request: a command that rejects is answered from memory.
 *
 * What replicas learn besides epochs goes through its own port
 * ({@link EpochRepository.learning}, learning.ts), made with the shared store.
 */

export type { StoreOperation } from './store-health.js';

export interface RepositoryOptions {
  readonly memory: MemoryEpochStore;
  /** The TTL of an epoch in the shared store. */
  readonly ttlMs: number;
  readonly logger?: CompactionLogger | undefined;
  /** Told of each command that failed (the metrics). */
  readonly onFault?: ((operation: StoreOperation) => void) | undefined;
  readonly now?: () => number;
  /** Named in the outage's log lines. */
  readonly name: string;
  /** The shared store's port for ratios and back-offs, when it shares them. */
  readonly learning?: SharedLearning | undefined;
}

/** A lease nobody else can hold: alone, or the shared store unreachable, this replica computes on its own (its single flight still joins its own callers). */
const OWN_LEASE: EpochLease = { renew: async () => true, release: async () => undefined };

/**
 * The conversation a history belongs to: the prefix hash of its head and
 * first user turn, the same for every request of it whatever its length. It
 * names the conversation's back-off, its home slot and, on a Redis Cluster,
 * the hash tag of its keys.
 */
export function conversationOf(history: { readonly hashes: readonly string[]; readonly messages: readonly ChatMessage[] }): string {
  return history.hashes[Math.min(headLength(history.messages) + 1, history.messages.length)]!;
}

export class EpochRepository {
  /** What the shared store shares besides epochs; undefined for a replica alone. */
  readonly learning: SharedLearning | undefined;
  readonly #shared: SharedStore | null;
  readonly #memory: MemoryEpochStore;
  readonly #options: RepositoryOptions;
  readonly #now: () => number;
  readonly #health: StoreHealth | null;

  /** `shared`: null for a replica alone (memory is the store). */
  constructor(shared: SharedStore | null, options: RepositoryOptions, health?: StoreHealth | null) {
    this.#shared = shared;
    this.#options = options;
    this.#memory = options.memory;
    this.#now = options.now ?? Date.now;
    this.learning = options.learning;
    this.#health = health !== undefined ? health : shared === null ? null : new StoreHealth(shared, options);
  }

  /** A replica alone: its memory store is all there is. */
  static inMemory(memory: MemoryEpochStore): EpochRepository {
    return new EpochRepository(null, { memory, ttlMs: Number.POSITIVE_INFINITY, name: 'memory' });
  }

  /** The epochs of the conversation this history belongs to (on a Redis Cluster, its keys on one node). */
  forHistory(history: { readonly hashes: readonly string[]; readonly messages: readonly ChatMessage[] }): EpochRepository {
    return this.forConversation(conversationOf(history));
  }

  /** The store as one conversation uses it: the shared store's view of it, the same memory and the same outage. */
  forConversation(conversation: string): EpochRepository {
    const view = this.#shared?.forConversation?.(conversation);
    return view === undefined ? this : new EpochRepository(view, this.#options, this.#health);
  }

  /** Epochs held in this process's memory (the shared store counts its own). */
  get size(): number {
    return this.#memory.size;
  }

  get bytes(): number {
    return this.#memory.bytes;
  }

  /** Whether a shared store shares the epochs (else this replica is alone). */
  get shared(): boolean {
    return this.#shared !== null;
  }

  /** Whether the replica is working from memory now (the shared store down, or its last command failed). */
  get degraded(): boolean {
    return this.#health?.degraded ?? false;
  }

  /** The epochs for a history whose prefix hashes are `hashes` (`hashes[i]` names the first `i` messages): one round trip, most often. */
  async lookup(hashes: readonly string[], options: LookupOptions = {}): Promise<EpochLookup> {
    const local = this.#memory.lookup(hashes);
    if (this.#shared === null || this.#health === null) return local;
    const shared = this.#shared;
    const reply = await this.#health.call('lookup', () => sharedLookup(shared, hashes, options));
    if (reply === undefined) return { ...local, degraded: true };
    let inUse = reply.inUse;
    // Memory knows a longer one: the shared store was flushed or restarted empty. It is written back, so other replicas find it again.
    if (local.inUse !== null && (inUse === null || local.inUse.seenLength > inUse.seenLength)) {
      inUse = local.inUse;
      void this.save(inUse);
    } else if (inUse !== null) {
      this.#memory.set(inUse);
    }
    const pending = reply.pending !== null && isBeyond(reply.pending, inUse) ? reply.pending : local.pending;
    const running = reply.runningElsewhere === undefined || pending !== null ? {} : { runningElsewhere: reply.runningElsewhere };
    return { inUse, pending, ...running };
  }

  /** The epoch stored under `key`, in use or pending. */
  async load(key: string): Promise<Epoch | undefined> {
    const shared = this.#shared;
    if (shared === null || this.#health === null) return this.#memory.get(key);
    return (await this.#health.call('load', () => shared.load(key))) ?? this.#memory.get(key);
  }

  async save(epoch: Epoch): Promise<void> {
    this.#memory.set(epoch);
    const shared = this.#shared;
    if (shared === null || this.#health === null) return;
    const ttl = epoch.expiresAt === undefined ? this.#options.ttlMs : Math.min(this.#options.ttlMs, epoch.expiresAt - this.#now());
    if (ttl <= 0) return;
    await this.#health.call('save', () => shared.save(epoch, ttl));
  }

  /** Takes the lease on computing `key` for `ttlMs`; null while another replica holds it. */
  async lease(key: string, ttlMs: number): Promise<EpochLease | null> {
    const shared = this.#shared;
    const health = this.#health;
    if (shared === null || health === null) return OWN_LEASE;
    const taken = await health.call('lease', async () => ({ lease: await shared.lease(key, ttlMs) }));
    if (taken === undefined) return OWN_LEASE;
    const { lease } = taken;
    if (lease === null) return null;
    return {
      // A renewal that could not be made keeps the lease: the summary runs on rather than be thrown away.
      renew: async () => (await health.call('lease', () => lease.renew())) !== false,
      release: async () => {
        await health.call('lease', () => lease.release());
      },
    };
  }

  /** Runs `compute` under the lease on `key`, or returns the epoch of the replica that holds it (lease.ts). */
  leased(key: string, options: LeasedOptions, compute: () => Promise<Epoch | null>): Promise<Epoch | null> {
    return leased(this, key, options, compute);
  }

  /** The epoch in use beneath the truncations of this history (truncations.ts). */
  beneath(hashes: readonly string[], epoch: Epoch): Promise<Epoch | null> {
    return epochBeneath((prefix) => this.lookup(prefix), hashes, epoch);
  }

  async close(): Promise<void> {
    await this.#shared?.close();
  }
}

/**
 * A shared store's lookup, its values chosen by the rules of lookup.ts. The
 * store's scan ends at the first value in use; when that one does not count
 * for this history (not a valid epoch, or not written for this prefix), the
 * prefixes beneath it are asked again, as the memory store's scan goes on:
 * rare, since only a damaged or tampered value does not count.
 */
async function sharedLookup(shared: SharedStore, hashes: readonly string[], options: LookupOptions): Promise<EpochLookup> {
  const choice = new EpochChoice(hashes);
  let runningElsewhere: string | undefined;
  for (let upTo = hashes.length; upTo > 1; ) {
    const reply = await shared.lookup(upTo === hashes.length ? hashes : hashes.slice(0, upTo), options);
    for (const { at, epoch } of reply.found) choice.offer(at, epoch);
    runningElsewhere ??= reply.runningElsewhere;
    if (choice.done || reply.stoppedAt === undefined) break;
    upTo = Math.min(upTo - 1, reply.stoppedAt);
  }
  const chosen = choice.result();
  return { ...chosen, ...(runningElsewhere === undefined ? {} : { runningElsewhere }) };
}
