/**
 * A summary's place in the summary queue (summary-queue.ts): foreground (a
 * request waits for it) or background (prepared ahead of need). A request
 * waiting for a summary is never behind a summary prepared ahead of need: 60
 * conversations in the soft zone used to make the 61st conversation's
 * crossing wait 20 s and be truncated (DESIGN.md § The request path, 6.4).
 */

import type { SummaryPlace } from '../types.js';

export type Priority = 'foreground' | 'background';

/**
 * How long a background summary may wait in line (for its place in the
 * summary queue, or for its slot: src/slots/summary-call.ts) before it is no
 * longer worth its call. It exists so its conversation's crossing does not
 * wait; when that crossing comes, the request waiting for it promotes it (it
 * is never dropped then). A conversation that sent nothing for two minutes has paused or ended
 * (agents send their next request within seconds, people within a minute or
 * two), and the upstream's slot no longer holds its prompt, so the call would
 * re-read all of it for an epoch that may never apply: dropped, the place goes
 * to conversations that are active, and a later soft-zone request of this one
 * queues a fresh summary of the longer history.
 */
export const BACKGROUND_USEFUL_MS = 2 * 60_000;

/** One summary's place in line: a background place moves up when a request comes to wait for it. */
export class QueuePlace implements SummaryPlace {
  #priority: Priority;
  #onPromote: (() => void) | undefined;
  #expired = false;
  /** @internal Set by the summary queue while the summary holds its place (summary-queue.ts). */
  stepAside: (<T>(wait: () => Promise<T>) => Promise<T>) | undefined;

  constructor(priority: Priority) {
    this.#priority = priority;
  }

  get priority(): Priority {
    return this.#priority;
  }

  get background(): boolean {
    return this.#priority === 'background';
  }

  /** Whether its wait for a slot ran out (the summary queue then reports it dropped). */
  get expired(): boolean {
    return this.#expired;
  }

  aside<T>(wait: () => Promise<T>): Promise<T> {
    if (this.#expired) return Promise.reject(new Error('this summary was dropped: its wait for a slot ran out'));
    return this.stepAside === undefined ? wait() : this.stepAside(wait);
  }

  expire(): void {
    this.#expired = true;
  }

  /** Moves a waiting background place behind the foreground ones (a request now waits for what it computes). */
  promote(): void {
    if (this.#priority === 'foreground') return;
    this.#priority = 'foreground';
    this.#onPromote?.();
  }

  /** @internal Told by the summary queue while the place waits in line. */
  set onPromote(listener: (() => void) | undefined) {
    this.#onPromote = listener;
  }
}
