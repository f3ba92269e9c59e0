/**
 * A summary's place in the summary queue (summary-queue.ts): foreground (a
 * request waits for it) or background (prepared ahead of need). A request
 * waiting for a summary is never behind a summary prepared ahead of need: 60
 * conversations in the soft zone used to make the 61st conversation's
 * crossing wait 20 s and be truncated (DESIGN.md § The request path, 6.4).
 */

import type { SummaryPlace } from '../types.js';

export type Priority = 'foreground' | 'background';

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
