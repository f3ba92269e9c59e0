import { LRUCache } from 'lru-cache';
import type { SharedLearning } from '../epochs/learning.js';

/**
 * Conversations whose summary failed within the last minute: they are not
 * tried again until then, so a broken summarizer is not hammered. Entries
 * expire with the minute (lru-cache's ttl), and the map never holds more than
 * {@link MAX_CONVERSATIONS}: a summarizer down for a day used to grow it with
 * every conversation.
 */

/** A conversation whose summary failed is not tried again sooner than this. */
export const FAILURE_BACKOFF_MS = 60_000;

/** Far more conversations than fail within one minute on one proxy; a bound, not a working size. */
const MAX_CONVERSATIONS = 10_000;

/** Where a replica tells the others of a conversation's failure and of its success (a shared store). */
export interface SharedBackoff {
  failed(conversation: string): void;
  succeeded(conversation: string): void;
}

/**
 * A shared store's side of the back-off: a failure is told at once, so no
 * replica retries that conversation's summary within the minute; a success
 * too, so none waits out a minute another replica's failure began.
 */
export function sharedBackoffOf(learning: SharedLearning | undefined): SharedBackoff | undefined {
  if (learning === undefined) return undefined;
  return {
    failed: (conversation) => void learning.noteFailure(conversation, FAILURE_BACKOFF_MS),
    succeeded: (conversation) => void learning.clearFailure(conversation),
  };
}

export class SummaryBackoff {
  readonly #failures: LRUCache<string, true>;
  /** Told of each failure noted here, and of each success (a shared store, so other replicas back off, or stop). */
  readonly #shared: SharedBackoff | undefined;

  constructor(now: () => number = Date.now, shared?: SharedBackoff) {
    this.#shared = shared;
    this.#failures = new LRUCache<string, true>({
      max: MAX_CONVERSATIONS,
      // Kept while its age is at most `ttl`: a failure ends its back-off once it is a full minute old.
      ttl: FAILURE_BACKOFF_MS - 1,
      // Read the clock on every check (the default caches it with a timer, which an injected clock cannot follow).
      ttlResolution: 0,
      perf: { now },
    });
  }

  /** Conversations in back-off now (failures older than a minute are forgotten as new ones come). */
  get size(): number {
    return this.#failures.size;
  }

  /** Whether this conversation's summary failed less than {@link FAILURE_BACKOFF_MS} ago. */
  has(conversation: string): boolean {
    return this.#failures.has(conversation);
  }

  /** Remembers a failure, forgetting those whose minute is over. */
  note(conversation: string): void {
    this.#failures.purgeStale();
    this.#failures.set(conversation, true);
    this.#shared?.failed(conversation);
  }

  /**
   * What the shared store says of the conversation: a back-off ending in
   * `remainingMs` (another replica's failure: kept as long, not told again),
   * or none (0): then none here either, since a summary of it succeeded
   * somewhere and cleared it for every replica.
   */
  adopt(conversation: string, remainingMs: number): void {
    if (!(remainingMs > 0)) {
      this.#failures.delete(conversation);
      return;
    }
    this.#failures.purgeStale();
    this.#failures.set(conversation, true, { ttl: Math.min(FAILURE_BACKOFF_MS - 1, remainingMs) });
  }

  /** A summary of the conversation succeeded: its back-off ends, here and (told) on every replica. */
  forget(conversation: string): void {
    this.#failures.delete(conversation);
    this.#shared?.succeeded(conversation);
  }
}
