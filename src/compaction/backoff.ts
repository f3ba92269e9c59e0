import { LRUCache } from 'lru-cache';

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

export class SummaryBackoff {
  readonly #failures: LRUCache<string, true>;
  /** Told of each failure noted here (a shared store, so other replicas back off too). */
  readonly #onFailure: ((conversation: string) => void) | undefined;

  constructor(now: () => number = Date.now, onFailure?: (conversation: string) => void) {
    this.#onFailure = onFailure;
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
    this.#onFailure?.(conversation);
  }

  /** A failure another replica saw, `remainingMs` before its back-off ends: kept as long, and not told again. */
  adopt(conversation: string, remainingMs: number): void {
    if (!(remainingMs > 0)) return;
    this.#failures.purgeStale();
    this.#failures.set(conversation, true, { ttl: Math.min(FAILURE_BACKOFF_MS - 1, remainingMs) });
  }

  forget(conversation: string): void {
    this.#failures.delete(conversation);
  }
}
