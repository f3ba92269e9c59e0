import { SlotFiles } from './slot-files.js';
import { type SlotActions, type SlotWork, SlotKeeper } from './slot-keeper.js';

/**
 * Which llama-server slot a request runs in (issue 28). llama-server picks a
 * slot by prompt similarity and LRU and does not know conversations: a
 * conversation's next turn lands in another one's slot while its own runs a
 * summary, and the knock-on re-reads whole histories. Here each conversation
 * has a home slot (keyed like its epochs), and each slot has a *slot queue*:
 * at most one request in flight per slot, because pinning a request to a busy
 * slot makes llama-server move caches in and out of it and fail some; the
 * others of that slot wait in arrival order.
 *
 * - A request that waited `waitMs` takes a free slot instead (its home moves
 *   there), or the first slot that frees, before every request that came
 *   after it: a slot queue never starves anyone.
 * - A request without a home (a new or evicted conversation, a guest) takes
 *   a free slot, else the first slot that frees: none sits idle meanwhile.
 * - More conversations than slots: the least recently used slot's owner is
 *   evicted for the one that asks; with `save` its KV is saved to a file
 *   named by its key before the slot is reused, and restored when it returns.
 * - A suffix summary runs on its conversation's slot, in the slot queue like
 *   a turn (serialized: bench/README.md measures why); with `save` the slot
 *   is saved first, so a turn that moves away restores the conversation
 *   rather than re-reading it. A prepend summary is a guest: it takes a slot
 *   nobody calls home, or evicts the least recently used owner.
 *
 * Pure but for the slot actions (save, restore, erase) and the timers, both
 * injected.
 */

export type { SlotActions, SlotWork } from './slot-keeper.js';

export interface SlotTimers {
  after(ms: number, run: () => void): () => void;
  readonly now: number;
}

export interface SlotSchedulerOptions {
  readonly slots: number;
  readonly waitMs: number;
  readonly save: boolean;
  readonly saveMaxBytes: number;
  readonly actions: SlotActions;
  readonly timers?: SlotTimers;
  /** Told when saving stops for good (the server refused a save). */
  readonly onSaveRefused?: () => void;
}

export interface SlotLease {
  readonly slot: number;
  /** How long the request waited in its slot queue. */
  readonly waitedMs: number;
  /** The request is over (its answer ended or failed): the next of the slot queue goes. Idempotent. */
  release(): void;
}

export interface SlotView {
  readonly slot: number;
  readonly owner: string | null;
  readonly inFlight: boolean;
  readonly queued: number;
  readonly waits: number;
  readonly waitMsTotal: number;
  readonly waitMsMax: number;
}

export interface SlotStats {
  readonly slots: SlotView[];
  readonly evictions: number;
  readonly moves: number;
  readonly saves: number;
  readonly restores: number;
  readonly saveFailures: number;
  readonly restoreFailures: number;
  readonly files: number;
  readonly filesBytes: number;
  readonly filesErased: number;
}

interface Slot {
  readonly id: number;
  owner: string | null;
  /** Whose conversation the slot's KV holds (null: none, or a guest's). */
  holds: string | null;
  inFlight: boolean;
  readonly queue: Waiter[];
  lastUsed: number;
  waits: number;
  waitMsTotal: number;
  waitMsMax: number;
}

interface Waiter {
  readonly work: SlotWork;
  readonly seq: number;
  readonly since: number;
  expired: boolean;
  cancel: () => void;
  readonly grant: (slot: Slot) => void;
}

const REAL_TIMERS: SlotTimers = {
  after(ms, run) {
    const timer = setTimeout(run, ms);
    timer.unref();
    return () => clearTimeout(timer);
  },
  get now() {
    return performance.now();
  },
};

export class SlotScheduler {
  readonly #slots: Slot[];
  readonly #homes = new Map<string, Slot>();
  /** Requests without a home slot, in arrival order: each takes the first slot that frees. */
  readonly #homeless: Waiter[] = [];
  readonly #keeper: SlotKeeper;
  readonly #options: SlotSchedulerOptions;
  readonly #timers: SlotTimers;
  #tick = 0;
  #seq = 0;
  readonly #counts = { evictions: 0, moves: 0 };

  constructor(options: SlotSchedulerOptions) {
    this.#options = options;
    this.#timers = options.timers ?? REAL_TIMERS;
    this.#keeper = new SlotKeeper({ actions: options.actions, save: options.save, files: new SlotFiles(options.saveMaxBytes), ...(options.onSaveRefused === undefined ? {} : { onSaveRefused: options.onSaveRefused }) });
    this.#slots = Array.from({ length: options.slots }, (_, id) => ({ id, owner: null, holds: null, inFlight: false, queue: [], lastUsed: 0, waits: 0, waitMsTotal: 0, waitMsMax: 0 }));
  }

  get slotCount(): number {
    return this.#slots.length;
  }

  homeOf(key: string): number | undefined {
    return this.#homes.get(key)?.id;
  }

  /** A slot for `work`: at once when its slot is free, else after the slot queue; rejects when `signal` aborts first. */
  acquire(work: SlotWork, signal?: AbortSignal): Promise<SlotLease> {
    signal?.throwIfAborted();
    const home = work.kind === 'guest' ? undefined : this.#homes.get(work.key);
    return new Promise<SlotLease>((resolve, reject) => {
      const since = this.#timers.now;
      const onAbort = (): void => {
        this.#leave(waiter);
        reject(signal?.reason ?? new Error('aborted'));
      };
      const waiter: Waiter = {
        work,
        seq: ++this.#seq,
        since,
        expired: false,
        cancel: () => undefined,
        grant: (granted) => {
          waiter.cancel();
          signal?.removeEventListener('abort', onAbort);
          this.#keeper.prepare(granted, work, (key) => this.#homes.has(key)).then(
            () => resolve(this.#lease(granted, since)),
            () => resolve(this.#lease(granted, since)),
          );
        },
      };
      if (home === undefined) {
        // No home (a new or evicted conversation, a guest): a free slot now, else the first one that frees.
        const free = this.#freeSlot();
        if (free !== undefined) return this.#move(waiter, free);
        this.#homeless.push(waiter);
        signal?.addEventListener('abort', onAbort, { once: true });
        waiter.cancel = this.#timers.after(this.#options.waitMs, () => this.#expire(waiter));
        return;
      }
      if (!home.inFlight && home.queue.length === 0) return this.#start(home, waiter);
      home.queue.push(waiter);
      signal?.addEventListener('abort', onAbort, { once: true });
      // A summary stays in its conversation's slot however long it waits: elsewhere it would re-read the whole history.
      if (work.kind !== 'summary') waiter.cancel = this.#timers.after(this.#options.waitMs, () => this.#expire(waiter));
    });
  }

  stats(): SlotStats {
    return {
      slots: this.#slots.map((slot) => ({
        slot: slot.id,
        owner: slot.owner,
        inFlight: slot.inFlight,
        queued: slot.queue.length,
        waits: slot.waits,
        waitMsTotal: slot.waitMsTotal,
        waitMsMax: slot.waitMsMax,
      })),
      ...this.#counts,
      ...this.#keeper.stats(),
    };
  }

  /** A free slot for a request without a home: one nobody calls home, else the least recently used owner's. */
  #freeSlot(): Slot | undefined {
    const free = this.#slots.filter((slot) => !slot.inFlight && slot.queue.length === 0);
    const lru = (candidates: Slot[]): Slot | undefined => candidates.reduce<Slot | undefined>((best, slot) => (best === undefined || slot.lastUsed < best.lastUsed ? slot : best), undefined);
    return lru(free.filter((slot) => slot.owner === null)) ?? lru(free);
  }

  /** `slot` becomes `key`'s home (a guest's: nobody's); its owner, if another, is evicted. */
  #rehome(slot: Slot, key: string | null): void {
    if (slot.owner !== null && slot.owner !== key) {
      this.#homes.delete(slot.owner);
      this.#counts.evictions++;
    }
    if (key !== null) {
      const old = this.#homes.get(key);
      if (old !== undefined && old !== slot) old.owner = null;
      this.#homes.set(key, slot);
    }
    slot.owner = key;
  }

  #start(slot: Slot, waiter: Waiter): void {
    slot.inFlight = true;
    slot.lastUsed = ++this.#tick;
    waiter.grant(slot);
  }

  #lease(slot: Slot, since: number): SlotLease {
    const waitedMs = this.#timers.now - since;
    slot.waits++;
    slot.waitMsTotal += waitedMs;
    slot.waitMsMax = Math.max(slot.waitMsMax, waitedMs);
    let released = false;
    return {
      slot: slot.id,
      waitedMs,
      release: () => {
        if (released) return;
        released = true;
        slot.inFlight = false;
        slot.lastUsed = ++this.#tick;
        this.#dispatch(slot);
      },
    };
  }

  /**
   * `slot` is free. Who goes: the next of its slot queue, unless a request
   * whose wait ran out (here or elsewhere, with or without a home) came
   * before it: past `waitMs` a request goes before every later one, so no
   * conversation starves another. With its queue empty, the first request
   * without a home (no slot sits idle while someone waits).
   */
  #dispatch(slot: Slot): void {
    const earliest = (waiters: Waiter[]): Waiter | undefined => waiters.reduce<Waiter | undefined>((first, waiter) => (first === undefined || waiter.seq < first.seq ? waiter : first), undefined);
    const expired = earliest([...this.#homeless, ...this.#slots.filter((other) => other !== slot).flatMap((other) => other.queue)].filter((waiter) => waiter.expired));
    const next = slot.queue[0];
    if (next !== undefined && (expired === undefined || next.seq < expired.seq)) return this.#start(slot, slot.queue.shift()!);
    const first = expired ?? earliest(this.#homeless);
    if (first !== undefined) this.#move(first, slot);
  }

  /** A request waited `waitMs`: it takes a free slot if there is one, else the first that frees. */
  #expire(waiter: Waiter): void {
    waiter.expired = true;
    const target = this.#freeSlot();
    if (target !== undefined) this.#move(waiter, target);
  }

  /** `waiter` runs in `target`, which becomes its conversation's home (a move when it had another). */
  #move(waiter: Waiter, target: Slot): void {
    this.#leave(waiter);
    const key = waiter.work.kind === 'guest' ? null : waiter.work.key;
    const home = key === null ? undefined : this.#homes.get(key);
    if (home !== undefined && home !== target) this.#counts.moves++;
    this.#rehome(target, key);
    this.#start(target, waiter);
  }

  #leave(waiter: Waiter): void {
    waiter.cancel();
    const homeless = this.#homeless.indexOf(waiter);
    if (homeless !== -1) this.#homeless.splice(homeless, 1);
    for (const slot of this.#slots) {
      const index = slot.queue.indexOf(waiter);
      if (index !== -1) slot.queue.splice(index, 1);
    }
  }
}
