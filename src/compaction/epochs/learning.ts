import type { UnsharedMeasures } from '../types.js';

/**
 * What replicas learn from one another besides epochs, behind a port of its
 * own: the token ratio of each tenant's model (every replica's measures
 * merged in order into one moving average) and the back-off of a
 * conversation whose summary failed. A shared store implements it beside its
 * epochs (Redis: redis-learning.ts); a replica alone has none, and learns
 * only what it sees. Every call goes on without the store when it cannot be
 * reached (a fault is counted, never a failed request).
 */

/** What the shared store says, read with a request's first lookup; a part is absent when it could not be read. */
export interface LearnedState {
  /** The token ratio every replica's measures made, when one was shared and verifies. */
  readonly ratio?: number;
  /** How long a summary failure of the conversation still holds back its summary (ms; 0: none). */
  readonly backoffMs?: number;
}

export interface SharedLearning {
  /** The ratio of a tenant's model and the back-off of a conversation (named as `conversationOf` names it). */
  read(tenant: string, model: string, conversation: string): Promise<LearnedState>;
  /** Merges these measures into the shared ratios, each pair's in order. */
  shareRatios(measures: readonly UnsharedMeasures[]): Promise<void>;
  /** Holds the conversation's summary back for `ms` on every replica. */
  noteFailure(conversation: string, ms: number): Promise<void>;
  /** Ends the conversation's back-off for every replica (its summary succeeded). */
  clearFailure(conversation: string): Promise<void>;
}
