import type { ChatMessage } from '../transcript/message.js';

/**
 * The words compaction's rooms share (policy/, epochs/, summary/, the
 * engine): types only, importing nothing but the transcript's message, so
 * any file of compaction/ can use them without importing another room.
 */

/** What a compaction did: no model call (pruning, compression), a summary of old turns, or a summary of old steps of one turn. */
export type Tier = 'prune' | 'compress' | 'summary' | 'steps';

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
  /** A shared store did not answer (down, or slower than its bound): this is what this process's memory knows. */
  readonly degraded?: true;
  /**
   * A shared store: another replica holds the lease on a prefix of this
   * history beyond the epoch in use (it computes the conversation's next
   * epoch), named by the lease. Absent when there is a pending epoch.
   */
  readonly runningElsewhere?: string;
}

export interface LookupOptions {
  /**
   * Wait longer than the store's usual bound: asked before writing a summary
   * that an answer not given in time led to (a summary costs seconds, and
   * would not be written by a replica that got the answer).
   */
  readonly patient?: boolean;
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
  lookup(hashes: readonly string[], shared?: SharedReads, options?: LookupOptions): Promise<EpochLookup>;
  /**
   * The store as one conversation's requests use it (named as the back-off
   * names it): a Redis Cluster keeps a conversation's keys on one node.
   * Absent: the store itself.
   */
  forConversation?(conversation: string): EpochStore;
  /** A shared store merges these measures into its ratios (off the request path); absent in memory. */
  shareRatios?(measures: readonly UnsharedMeasures[]): Promise<void>;
  /** A shared store holds the conversation's summary back for `ms` on every replica; absent in memory. */
  noteFailure?(conversation: string, ms: number): Promise<void>;
  /** A shared store ends the conversation's back-off on every replica (its summary succeeded); absent in memory. */
  clearFailure?(conversation: string): Promise<void>;
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

/**
 * Weight of a new token-ratio measure: a few requests are enough to follow a
 * change of model, one odd request is not. The one constant here: the
 * learned ratios (token-ratio.ts) and a shared store's merge of every
 * replica's measures (epochs/redis-store.ts) must average alike.
 */
export const LEARNING_WEIGHT = 0.3;

/** A (tenant, model) pair's measures not yet given to the shared store. */
export interface UnsharedMeasures {
  /** The pair's name in the store: see {@link sharedRatioName}. */
  readonly name: string;
  readonly samples: readonly number[];
}

/**
 * A summary's place in the summary queue as its slot sees it (issue 33 item
 * 2): the summary gives its concurrency place back while it waits for a
 * slot and takes one again once it holds the slot, so a summary parked
 * behind a busy slot never keeps another one from its free slot; and a
 * background summary whose wait for a slot ran out is dropped.
 */
export interface SummaryPlace {
  /** Prepared ahead of need (it may be dropped), not waited for by a request. */
  readonly background: boolean;
  /** Runs `wait` (the wait for a slot) without the concurrency place, then takes a place again, before every summary that has not begun. */
  aside<T>(wait: () => Promise<T>): Promise<T>;
  /** Its wait for a slot ran out: the summary is dropped (the next crossing decides again), and waits for no slot again. */
  expire(): void;
}

export interface SummarizeRequest {
  /** The client's request body: model, tools and template fields come from it. */
  readonly body: Readonly<Record<string, unknown>>;
  /** What compactor would forward (an earlier epoch applied). */
  readonly candidate: readonly ChatMessage[];
  /** The old part is `candidate[head, cut)`. */
  readonly head: number;
  readonly cut: number;
  /** The candidate indexes where compactor's marks are genuine (where an epoch's replacement put them); anything else that looks marked is a client's text. */
  readonly marked: ReadonlySet<number>;
  /** Notes of the epoch the candidate starts from, merged rather than re-summarized. */
  readonly earlierNotes: string | null;
  /** The summarizer's window in tokens; null when unknown (then every request is tried as it is). */
  readonly window: number | null;
  /** Size in real tokens of messages sent with the request's tools (ratio applied). */
  readonly sizeOfMessages: (messages: readonly ChatMessage[], withTools: boolean) => number;
  readonly model: string;
  readonly maxTokens: number;
  readonly systemPrompt?: string;
  readonly signal: AbortSignal;
  readonly onProgress?: (progress: SummaryProgress) => void;
  /** The conversation's home-slot key, when the upstream's slots are scheduled. */
  readonly slotKey?: string;
  /** The summary's place in the summary queue, given back while a call waits for its slot (ports.ts). */
  readonly place?: SummaryPlace;
}

export interface SummaryProgress {
  readonly messages: number;
  readonly chunk: number;
  readonly chunks: number;
}

