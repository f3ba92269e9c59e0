import { QueuePlace } from './queue-place.js';

/**
 * The summary calls, shared fairly between tenants (issue 21 items 3 and 5):
 * at most `limit` summaries run at once (not llama-server's slots: those are
 * src/slots/); a freed place goes to the next tenant in turn that
 * has a summary waiting (round-robin), a request waiting for a summary
 * (foreground) before every background summary, and inside a tenant each
 * kind in arrival order. One tenant's 30 forced compactions used to queue
 * ahead of everyone: another tenant's crossing took 31 summary durations.
 *
 * Bounded: a tenant may have `maxQueuedPerTenant` summaries waiting (a new
 * one then drops that tenant's stalest background summary, or is refused
 * when all of them are requests waiting), and all tenants together
 * `maxQueuedBackground` background ones (the stalest is dropped). A
 * background summary that waited longer than `backgroundMaxWaitMs` is dropped
 * when its turn comes. Every drop and refusal names its limit to `onDrop`.
 */

export interface SummaryQueueOptions {
  readonly limit: number;
  readonly maxQueuedPerTenant: number;
  readonly maxQueuedBackground: number;
  readonly backgroundMaxWaitMs?: number;
  readonly now?: () => number;
  /** Told of each summary dropped or refused, with the limit that did it. */
  readonly onDrop?: (limit: string) => void;
}

/** How a place in line ended without running: the limit that dropped or refused it. */
export class NotRun {
  constructor(readonly dropped: string) {}
}

interface Waiter {
  readonly tenant: string;
  readonly place: QueuePlace;
  readonly queuedAt: number;
  readonly settle: (outcome: NotRun | null) => void;
}

interface Lane {
  readonly foreground: Waiter[];
  readonly background: Waiter[];
}

export const PER_TENANT_LIMIT = 'compaction.summary.max_queued_per_tenant';
export const BACKGROUND_LIMIT = 'compaction.summary.max_queued_background';
export const STALE_LIMIT = 'background summary waited longer than it is useful';

export class SummaryQueue {
  #available: number;
  readonly #lanes = new Map<string, Lane>();
  /** When each tenant was last given a place (a serial number): the least recently served goes next. */
  readonly #lastServed = new Map<string, number>();
  #served = 0;
  #backgroundWaiting = 0;
  /** Summaries that hold their slot and wait for a place again: served before any other. */
  readonly #returning: Array<() => void> = [];
  readonly #options: Required<Omit<SummaryQueueOptions, 'onDrop'>> & Pick<SummaryQueueOptions, 'onDrop'>;

  constructor(options: SummaryQueueOptions) {
    this.#options = { backgroundMaxWaitMs: Number.POSITIVE_INFINITY, now: Date.now, ...options };
    this.#available = Math.max(1, Math.floor(options.limit));
  }

  /** Summaries waiting for a place now. */
  get waiting(): number {
    let waiting = 0;
    for (const lane of this.#lanes.values()) waiting += lane.foreground.length + lane.background.length;
    return waiting;
  }

  /**
   * Runs `work` once a place is free, or resolves to how it was dropped or
   * refused without running. While `work` waits for a llama-server slot
   * (`place.aside`), the place is given back and taken again once the slot
   * is held, before every summary not yet begun (it holds a slot); a summary
   * whose wait for a slot ran out (`place.expire`) is dropped.
   */
  async use<T>(tenant: string, work: () => Promise<T>, place: QueuePlace = new QueuePlace('foreground')): Promise<T | NotRun> {
    const refused = await this.#acquire(tenant, place);
    if (refused !== null) return refused;
    let held = true;
    place.stepAside = async <R>(wait: () => Promise<R>): Promise<R> => {
      if (held) {
        held = false;
        this.#release();
      }
      const result = await wait();
      await this.#takeAgain(tenant);
      held = true;
      return result;
    };
    try {
      return await work();
    } catch (error) {
      if (place.expired) return this.#dropped(STALE_LIMIT);
      throw error;
    } finally {
      place.stepAside = undefined;
      if (held) this.#release();
    }
  }

  /** A place for a summary that holds its slot: at once when free, else the first that frees. */
  #takeAgain(tenant: string): Promise<void> {
    if (this.#available > 0) {
      this.#available--;
      this.#noteServed(tenant);
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#returning.push(() => (this.#noteServed(tenant), resolve())));
  }

  #acquire(tenant: string, place: QueuePlace): Promise<NotRun | null> {
    if (this.#available > 0) {
      this.#available--;
      this.#noteServed(tenant);
      return Promise.resolve(null);
    }
    const lane = this.#laneOf(tenant);
    if (lane.foreground.length + lane.background.length >= this.#options.maxQueuedPerTenant) {
      const stalest = lane.background[0];
      if (stalest === undefined || place.priority === 'background') return Promise.resolve(this.#dropped(PER_TENANT_LIMIT));
      this.#remove(stalest);
      stalest.settle(this.#dropped(PER_TENANT_LIMIT));
    }
    if (place.priority === 'background' && this.#backgroundWaiting >= this.#options.maxQueuedBackground) {
      const stalest = this.#stalestBackground();
      if (stalest === undefined) return Promise.resolve(this.#dropped(BACKGROUND_LIMIT));
      this.#remove(stalest);
      stalest.settle(this.#dropped(BACKGROUND_LIMIT));
    }
    return new Promise<NotRun | null>((settle) => {
      const waiter: Waiter = { tenant, place, queuedAt: this.#options.now(), settle };
      this.#enqueue(waiter);
      place.onPromote = () => {
        const index = lane.background.indexOf(waiter);
        if (index < 0) return;
        lane.background.splice(index, 1);
        this.#backgroundWaiting--;
        lane.foreground.push(waiter);
      };
    });
  }

  #laneOf(tenant: string): Lane {
    let lane = this.#lanes.get(tenant);
    if (lane === undefined) {
      lane = { foreground: [], background: [] };
      this.#lanes.set(tenant, lane);
    }
    return lane;
  }

  #enqueue(waiter: Waiter): void {
    const lane = this.#laneOf(waiter.tenant);
    if (waiter.place.priority === 'foreground') lane.foreground.push(waiter);
    else {
      lane.background.push(waiter);
      this.#backgroundWaiting++;
    }
  }

  #remove(waiter: Waiter): void {
    const lane = this.#lanes.get(waiter.tenant);
    if (lane === undefined) return;
    const list = waiter.place.priority === 'foreground' ? lane.foreground : lane.background;
    const index = list.indexOf(waiter);
    if (index < 0) return;
    list.splice(index, 1);
    if (list === lane.background) this.#backgroundWaiting--;
    waiter.place.onPromote = undefined;
    this.#forgetIfEmpty(waiter.tenant, lane);
  }

  #forgetIfEmpty(tenant: string, lane: Lane): void {
    if (lane.foreground.length + lane.background.length > 0) return;
    this.#lanes.delete(tenant);
  }

  #noteServed(tenant: string): void {
    this.#lastServed.delete(tenant);
    this.#lastServed.set(tenant, this.#served++);
    // Only tenants still waiting, and the few served last, need remembering: the map stays as small as the queue.
    for (const known of this.#lastServed.keys()) {
      if (this.#lastServed.size <= this.#lanes.size + this.#options.limit + 1) break;
      if (!this.#lanes.has(known)) this.#lastServed.delete(known);
    }
  }

  /** The background waiter queued longest ago, across tenants (each lane's first is its stalest). */
  #stalestBackground(): Waiter | undefined {
    let stalest: Waiter | undefined;
    for (const lane of this.#lanes.values()) {
      const first = lane.background[0];
      if (first !== undefined && (stalest === undefined || first.queuedAt < stalest.queuedAt)) stalest = first;
    }
    return stalest;
  }

  #dropped(limit: string): NotRun {
    this.#options.onDrop?.(limit);
    return new NotRun(limit);
  }

  /** The next waiter: of the tenants with a request waiting (else with a background summary), the one served least recently. */
  #next(): Waiter | undefined {
    for (const kind of ['foreground', 'background'] as const) {
      let chosen: Lane | undefined;
      let chosenServed = Number.POSITIVE_INFINITY;
      for (const [tenant, lane] of this.#lanes) {
        if (lane[kind].length === 0) continue;
        const served = this.#lastServed.get(tenant) ?? -1;
        if (served < chosenServed) [chosen, chosenServed] = [lane, served];
      }
      const waiter = chosen?.[kind][0];
      if (waiter === undefined) continue;
      this.#remove(waiter);
      return waiter;
    }
    return undefined;
  }

  /** Hands the freed place to the next waiter that is still useful, or gives it back. */
  #release(): void {
    const returning = this.#returning.shift();
    if (returning !== undefined) return returning();
    for (;;) {
      const next = this.#next();
      if (next === undefined) {
        this.#available++;
        return;
      }
      if (next.place.priority === 'background' && this.#options.now() - next.queuedAt > this.#options.backgroundMaxWaitMs) {
        next.settle(this.#dropped(STALE_LIMIT));
        continue;
      }
      this.#noteServed(next.tenant);
      next.settle(null);
      return;
    }
  }
}
