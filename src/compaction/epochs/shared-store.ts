import type { Epoch, LookupOptions } from '../types.js';

/**
 * The one interface a store shared by replicas implements (Redis today): its
 * epochs as plain commands, each resolving with what the store answered or
 * rejecting (a fault). It decides nothing: which epoch counts is lookup.ts's,
 * what a fault means is repository.ts's, and what replicas learn besides
 * epochs (ratios, back-offs) goes through its own port (learning.ts).
 */

/** What a shared store's lookup found, longest prefix first, not yet checked against the history. */
export interface SharedLookup {
  /**
   * Each value found: the prefix length it was stored under and its epoch
   * (undefined: a value that is not a valid one), down to the first value in
   * use, which ends the scan.
   */
  readonly found: ReadonlyArray<{ readonly at: number; readonly epoch: Epoch | undefined }>;
  /** The prefix length of the value in use the scan ended at; absent when it went through every prefix. */
  readonly stoppedAt?: number;
  /** The lease of a prefix beyond the epoch in use that another replica is summarizing, when there is one. */
  readonly runningElsewhere?: string;
}

/** A lease as the shared store holds it: its calls reject when the store cannot be reached. */
export interface SharedLease {
  /** False when the lease was lost (expired and taken by another replica). */
  renew(): Promise<boolean>;
  release(): Promise<void>;
}

/** Whether a shared store can be reached: what the repository and the learning port wait for and warn about. */
export interface Connectivity {
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
}

export interface SharedStore extends Connectivity {
  /** `hashes[i]` names the first `i` messages; `patient`: a longer bound than the usual one (see {@link LookupOptions}). */
  lookup(hashes: readonly string[], options?: LookupOptions): Promise<SharedLookup>;
  /** The commands as one conversation sends them (on a cluster: its keys carry its hash tag). */
  forConversation?(conversation: string): SharedStore;
  load(key: string): Promise<Epoch | undefined>;
  save(epoch: Epoch, ttlMs: number): Promise<void>;
  /** Null while another replica holds the lease. */
  lease(key: string, ttlMs: number): Promise<SharedLease | null>;
  close(): Promise<void>;
}
