/**
 * At most `limit` holders at once; the rest wait in line, foreground places
 * before every background place, each kind in arrival order (DESIGN.md
 * § The request path, 6.4). A request waiting for a summary is never behind a
 * summary prepared ahead of need: 60 conversations in the soft zone used to
 * make the 61st conversation's crossing wait 20 s and be truncated.
 */

export type Priority = 'foreground' | 'background';

/** One holder's place in line: a background place moves up when a request comes to wait for it. */
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

  /** @internal Told by the semaphore while the place waits in line. */
  set onPromote(listener: (() => void) | undefined) {
    this.#onPromote = listener;
  }
}

interface Waiter {
  readonly place: QueuePlace;
  readonly queuedAt: number;
  readonly grant: (granted: boolean) => void;
}

export interface SemaphoreOptions {
  readonly limit: number;
  readonly now?: () => number;
  /** A background place that waited longer than this is dropped when its turn comes (Infinity: never). */
  readonly backgroundMaxWaitMs?: number;
}

export class Semaphore {
  #available: number;
  readonly #foreground: Waiter[] = [];
  readonly #background: Waiter[] = [];
  readonly #now: () => number;
  readonly #backgroundMaxWaitMs: number;

  constructor(options: SemaphoreOptions | number) {
    const { limit, now = Date.now, backgroundMaxWaitMs = Number.POSITIVE_INFINITY } = typeof options === 'number' ? { limit: options } : options;
    this.#available = Math.max(1, Math.floor(limit));
    this.#now = now;
    this.#backgroundMaxWaitMs = backgroundMaxWaitMs;
  }

  /** Places waiting in line now. */
  get waiting(): number {
    return this.#foreground.length + this.#background.length;
  }

  /**
   * Runs `work` once a place is free. Resolves to {@link DROPPED} without
   * running it when its place was background and waited longer than it is useful.
   */
  async use<T>(work: () => Promise<T>, place: QueuePlace = new QueuePlace('foreground')): Promise<T | typeof DROPPED> {
    if (!(await this.#acquire(place))) return DROPPED;
    try {
      return await work();
    } finally {
      this.#release();
    }
  }

  #acquire(place: QueuePlace): Promise<boolean> {
    if (this.#available > 0) {
      this.#available--;
      return Promise.resolve(true);
    }
    return new Promise<boolean>((grant) => {
      const waiter: Waiter = { place, queuedAt: this.#now(), grant };
      (place.priority === 'foreground' ? this.#foreground : this.#background).push(waiter);
      place.onPromote = () => {
        const index = this.#background.indexOf(waiter);
        if (index < 0) return;
        this.#background.splice(index, 1);
        this.#foreground.push(waiter);
      };
    });
  }

  /** Hands the freed place to the next waiter that is still useful, or gives it back. */
  #release(): void {
    for (;;) {
      const next = this.#foreground.shift() ?? this.#background.shift();
      if (next === undefined) {
        this.#available++;
        return;
      }
      next.place.onPromote = undefined;
      if (next.place.priority === 'background' && this.#now() - next.queuedAt > this.#backgroundMaxWaitMs) {
        next.grant(false);
        continue;
      }
      next.grant(true);
      return;
    }
  }
}

/** What {@link Semaphore.use} resolves to for a background place dropped from the line. */
export const DROPPED: unique symbol = Symbol('dropped from the summary queue');
