/**
 * A summary's place in the summary queue (summary-queue.ts): foreground (a
 * request waits for it) or background (prepared ahead of need). A request
 * waiting for a summary is never behind a summary prepared ahead of need: 60
 * conversations in the soft zone used to make the 61st conversation's
 * crossing wait 20 s and be truncated (DESIGN.md § The request path, 6.4).
 */

export type Priority = 'foreground' | 'background';

/** One summary's place in line: a background place moves up when a request comes to wait for it. */
export class QueuePlace {
  #priority: Priority;
  #onPromote: (() => void) | undefined;

  constructor(priority: Priority) {
    this.#priority = priority;
  }

  get priority(): Priority {
    return this.#priority;
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
