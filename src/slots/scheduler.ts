import type { ChatMessage } from '../transcript/message.js';
import { SlotFiles } from './slot-files.js';
import { type SlotWork, SlotKeeper } from './slot-keeper.js';
import { emptySlot, isBackground, isSummaryOf, REAL_TIMERS, signalOf, SlotWaitExpired, type Slot, type SlotLease, type SlotSchedulerOptions, type SlotStats, type SlotTimers, viewOf, type WaitAbort, type Waiter } from './slot-state.js';

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
 *   a turn; with `save` the slot is saved first, so a turn that moves away
 *   restores it. Without a file, a conversation's summary and turn never run
 *   side by side (the summary's slot holds the only current copy: the RAM
 *   cache keeps a slot's prompt only when a task overwrites most of it): a
 *   turn waits for its running summary and goes first when it ends, unless
 *   a request that came before it waited past its bound (past its own
 *   bound it takes a slot that stands free, never one another request
 *   waits for); a turn whose summary has not started goes before it, the
 *   summary right after it in its slot. A prepend summary is a guest: a slot nobody calls home, or
 *   the least recently used owner's.
 * - At most `backgroundInLine` background summaries (`summary.concurrency`)
 *   hold a place in line or a slot at once; the others wait for a place and
 *   take it behind every request that came meanwhile, as they would in
 *   llama-server's own queue. Else a crossing that every conversation
 *   reaches together puts all their summaries ahead of every later turn
 *   (8 conversations on 2 slots: a turn's p99 2.6 times llama-server's own).
 *   One whose slot stands free with nobody waiting for it starts at once.
 *
 * Pure but for the slot actions (save, restore, erase) and the timers, both
 * injected.
 */

export type { SlotActions, SlotWork } from './slot-keeper.js';
export type { SlotLease, SlotSchedulerOptions, SlotStats, SlotTimers, SlotView, WaitAbort } from './slot-state.js';
export { SlotWaitExpired } from './slot-state.js';

export class SlotScheduler {
  readonly #slots: Slot[];
  readonly #homes = new Map<string, Slot>();
  /** Requests without a home slot, in arrival order: each takes the first slot that frees. */
  readonly #homeless: Waiter[] = [];
  /** Background summaries waiting for a place in line (`backgroundInLine`), in arrival order. */
  readonly #held: Waiter[] = [];
  readonly #keeper: SlotKeeper;
  readonly #options: SlotSchedulerOptions;
  readonly #timers: SlotTimers;
  #tick = 0;
  #seq = 0;
  readonly #counts = { evictions: 0, moves: 0 };

  constructor(options: SlotSchedulerOptions) {
    this.#options = options;
    this.#timers = options.timers ?? REAL_TIMERS;
    this.#keeper = new SlotKeeper({ actions: options.actions, save: options.save, files: options.files ?? new SlotFiles(options.saveMaxBytes), ...(options.onSaveRefused === undefined ? {} : { onSaveRefused: options.onSaveRefused }) });
    this.#slots = Array.from({ length: options.slots }, (_, id) => emptySlot(id));
  }

  get slotCount(): number {
    return this.#slots.length;
  }

  homeOf(key: string): number | undefined {
    return this.#homes.get(key)?.id;
  }

  /** A slot for `work`: at once when its slot is free, else after the slot queue; rejects when `abort` aborts first. */
  acquire(work: SlotWork, abort?: WaitAbort): Promise<SlotLease> {
    if (abort?.aborted === true) signalOf(abort).throwIfAborted();
    // A held summary a request has come to wait for since takes its place before this one.
    this.#admit();
    return new Promise<SlotLease>((resolve, reject) => {
      const since = this.#timers.now;
      // Listened to only by a request that waits: most get their slot at once, and make no AbortSignal.
      let signal: AbortSignal | undefined;
      let granted = false;
      const onAbort = (): void => {
        this.#leave(waiter);
        reject(signal?.reason ?? new Error('aborted'));
        this.#admit();
      };
      // A turn's history is let go once it started (#start): what the slot records of its running work must not keep
      // an answer's body alive while it streams (issue 40: a thousand idle streams).
      const forwards = work.kind === 'turn' ? work.history : undefined;
      const waiter: Waiter = {
        work: forwards === undefined ? work : withoutHistory(work),
        forwards,
        seq: ++this.#seq,
        since,
        expired: false,
        cancel: () => undefined,
        drop: (error) => {
          this.#leave(waiter);
          signal?.removeEventListener('abort', onAbort);
          reject(error);
          this.#admit();
        },
        grant: (slot) => {
          granted = true;
          waiter.cancel();
          signal?.removeEventListener('abort', onAbort);
          this.#keeper.prepare(slot, work, (key) => this.#homes.has(key)).then(
            () => resolve(this.#lease(slot, since, waiter.history)),
            () => resolve(this.#lease(slot, since, waiter.history)),
          );
        },
      };
      if (this.#mustWaitForPlace(waiter)) this.#hold(waiter);
      else this.#place(waiter);
      if (granted || abort === undefined) return;
      signal = signalOf(abort);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  stats(): SlotStats {
    return {
      slots: this.#slots.map(viewOf),
      waitingForAny: this.#homeless.length + this.#held.length,
      ...this.#counts,
      ...this.#keeper.stats(),
    };
  }

  /**
   * Where a new request waits. A turn whose conversation's summary runs
   * (and has no slot file to restore elsewhere) waits for it in the
   * summary's slot: that slot holds the only current copy of the
   * conversation. A turn whose summary has not started takes the summary's
   * place in line (the summary, background work, runs after it, where it
   * ran). Else its home slot's queue; without a home, a free slot now or
   * the first one that frees.
   */
  #place(waiter: Waiter): void {
    const { work } = waiter;
    if (work.kind === 'turn' && !this.#keeper.canRestore(work)) {
      const running = this.#slots.find((slot) => isSummaryOf(slot.running, work.key));
      if (running !== undefined) return this.#queue(running, waiter);
      const summary = this.#waitingOf(work.key).find((other) => other.work.kind === 'summary');
      if (summary !== undefined) this.#swapPlaces(waiter, summary);
    }
    const home = work.kind === 'guest' ? undefined : this.#homes.get(work.key);
    if (home === undefined) {
      const free = this.#freeSlot();
      if (free !== undefined) return this.#move(waiter, free);
      this.#homeless.push(waiter);
      waiter.cancel = this.#timers.after(this.#waitMsOf(waiter), () => this.#expire(waiter));
      return;
    }
    if (!home.inFlight && home.queue.length === 0) return this.#start(home, waiter);
    this.#queue(home, waiter);
  }

  /**
   * `waiter` joins `slot`'s queue in arrival order; past `waitMs` it may go
   * elsewhere, but a summary stays (elsewhere it would re-read the whole
   * history), or leaves when it is background work.
   */
  #queue(slot: Slot, waiter: Waiter): void {
    const after = slot.queue.findIndex((other) => other.seq > waiter.seq);
    slot.queue.splice(after === -1 ? slot.queue.length : after, 0, waiter);
    waiter.cancel();
    if (waiter.work.kind !== 'summary' || waiter.work.background !== undefined) waiter.cancel = this.#timers.after(this.#waitMsOf(waiter), () => this.#expire(waiter));
  }

  /**
   * A new turn takes its waiting summary's place in line, and the summary
   * the place right behind it, before anyone who came after the summary. At
   * the end of the line it would be pushed back again by the next turn of
   * an active conversation, and again, until its crossing made a turn wait
   * for all of it (8 conversations on 2 slots: every summary, at once).
   * Places are numbers: halfway to the next whole one stays behind the turn
   * and before every later arrival, however often it is taken.
   */
  #swapPlaces(turn: Waiter, summary: Waiter): void {
    turn.seq = summary.seq;
    summary.seq = (summary.seq + Math.floor(summary.seq) + 1) / 2;
    const slot = this.#slots.find((candidate) => candidate.queue.includes(summary));
    if (slot === undefined) return;
    slot.queue.splice(slot.queue.indexOf(summary), 1);
    this.#queue(slot, summary);
  }

  /**
   * Whether `waiter`, a background summary, waits for a place in line:
   * `backgroundInLine` others hold one (or wait for one before it), and its
   * slot does not stand free with nobody waiting for it.
   */
  #mustWaitForPlace(waiter: Waiter): boolean {
    const limit = this.#options.backgroundInLine;
    if (limit === undefined || !isBackground(waiter.work)) return false;
    if (this.#held.length === 0 && this.#backgroundHoldingPlaces() < limit) return false;
    const { work } = waiter;
    const home = work.kind === 'guest' ? undefined : this.#homes.get(work.key);
    const startsNow = home === undefined ? this.#freeSlot() !== undefined : !home.inFlight && home.queue.length === 0;
    return !startsNow;
  }

  #hold(waiter: Waiter): void {
    this.#held.push(waiter);
    waiter.cancel = this.#timers.after(this.#waitMsOf(waiter), () => this.#expire(waiter));
  }

  /** Background summaries that hold a place in line or a slot. */
  #backgroundHoldingPlaces(): number {
    const waiting = [...this.#homeless, ...this.#slots.flatMap((slot) => slot.queue)].filter((waiter) => isBackground(waiter.work)).length;
    return waiting + this.#slots.filter((slot) => isBackground(slot.running)).length;
  }

  /**
   * Held summaries take their place in line: at once those a request has
   * come to wait for (no longer background work), then the others while
   * fewer than `backgroundInLine` hold one. A place taken now is behind
   * every request waiting now.
   */
  #admit(): void {
    const limit = this.#options.backgroundInLine;
    if (this.#held.length === 0 || limit === undefined) return;
    for (const waiter of this.#held.filter((held) => !isBackground(held.work))) this.#enter(waiter);
    while (this.#held.length > 0 && this.#backgroundHoldingPlaces() < limit) this.#enter(this.#held[0]!);
  }

  #enter(waiter: Waiter): void {
    this.#held.splice(this.#held.indexOf(waiter), 1);
    waiter.cancel();
    waiter.seq = ++this.#seq;
    this.#place(waiter);
  }

  /**
   * How long `waiter` waits before it may take another slot (background
   * work: before it is dropped, `backgroundWaitMs` since it asked, when it
   * says): `waitMs`, and for a turn never longer than reading its prompt
   * anew elsewhere would take at the speed the server reported (`msToRead`,
   * issue 33 item 4).
   */
  #waitMsOf(waiter: Waiter): number {
    const { work } = waiter;
    if (work.background !== undefined && work.backgroundWaitMs !== undefined) return Math.max(0, work.backgroundWaitMs - (this.#timers.now - waiter.since));
    const reRead = work.kind === 'turn' && work.tokens !== undefined ? (this.#options.msToRead?.(work.tokens) ?? null) : null;
    return reRead === null ? this.#options.waitMs : Math.min(this.#options.waitMs, reRead);
  }

  /** `key`'s requests waiting anywhere (without a home, or in a slot queue). */
  #waitingOf(key: string): Waiter[] {
    const ofKey = (waiter: Waiter): boolean => waiter.work.kind !== 'guest' && waiter.work.key === key;
    return [...this.#homeless, ...this.#slots.flatMap((slot) => slot.queue)].filter(ofKey);
  }

  /**
   * A conversation's summary never runs beside its turn: a summary about to
   * start in `slot` while its conversation's turn runs elsewhere waits
   * behind that turn instead (`slot` goes to the next). True when redirected.
   */
  #redirected(waiter: Waiter, slot: Slot): boolean {
    const { work } = waiter;
    if (work.kind !== 'summary') return false;
    const turn = this.#slots.find((other) => other !== slot && other.running?.kind === 'turn' && other.running.key === work.key);
    if (turn === undefined) return false;
    this.#leave(waiter);
    this.#queue(turn, waiter);
    if (!slot.inFlight) this.#dispatch(slot);
    return true;
  }

  /** Where a request of `key` just started, its other requests waiting elsewhere follow: the slot is about to hold the only current copy. */
  #gather(key: string, slot: Slot): void {
    for (const other of this.#waitingOf(key)) {
      if (slot.queue.includes(other)) continue;
      this.#leave(other);
      this.#queue(slot, other);
    }
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
    if (this.#redirected(waiter, slot)) return;
    slot.inFlight = true;
    slot.running = waiter.work;
    slot.lastUsed = ++this.#tick;
    waiter.grant(slot);
    // The turns that waited for this summary to find a slot wait for it here.
    if (waiter.work.kind !== 'guest') this.#gather(waiter.work.key, slot);
    if (waiter.work.kind === 'turn' && waiter.forwards !== undefined) this.#tellSummaries(waiter.work.key, waiter.forwards);
    waiter.forwards = undefined;
  }

  /**
   * A turn of `key` starts with `history`: its summaries still waiting
   * (held or in line) will find that history in the slot, not the one they
   * were written over; a suffix summary extended to it reads no turn again,
   * and neither does the turn after it (8 conversations on 2 slots: the
   * first turn after a summary held back for k turns re-read 331 tokens
   * each, 11k of the run's 156k).
   */
  #tellSummaries(key: string, history: readonly ChatMessage[]): void {
    for (const waiter of [...this.#held, ...this.#waitingOf(key)]) if (isSummaryOf(waiter.work, key)) waiter.history = history;
  }

  #lease(slot: Slot, since: number, history: readonly ChatMessage[] | undefined): SlotLease {
    const waitedMs = this.#timers.now - since;
    slot.waits++;
    slot.waitMsTotal += waitedMs;
    slot.waitMsMax = Math.max(slot.waitMsMax, waitedMs);
    let released = false;
    return {
      slot: slot.id,
      waitedMs,
      ...(history === undefined ? {} : { history }),
      release: () => {
        if (released) return;
        released = true;
        const ended = slot.running;
        slot.inFlight = false;
        slot.running = null;
        slot.lastUsed = ++this.#tick;
        // The turn held back for its conversation's summary goes next (it has waited the whole summary already), but
        // not before a request that came before it and waited past its bound: that one goes before every later one
        // (8 conversations on 2 slots: every such turn went first, and the turns sent before it waited for it too).
        const own = ended?.kind === 'summary' && !this.#keeper.canRestore(ended) ? slot.queue.find((waiter) => waiter.work.kind === 'turn' && waiter.work.key === ended.key) : undefined;
        if (own !== undefined && !this.#overdueBefore(own)) {
          this.#leave(own);
          this.#start(slot, own);
        } else this.#dispatch(slot);
        this.#admit();
      },
    };
  }

  /**
   * `slot` is free. Who goes: the next of its slot queue, unless a request
   * whose wait ran out (here or elsewhere, with or without a home) came
   * before it: past `waitMs` a request goes before every later one, so no
   * conversation starves another. With its queue empty, the first request
   * without a home (no slot sits idle while someone waits), and only then a
   * turn past its bound behind its own running summary.
   */
  #dispatch(slot: Slot): void {
    const earliest = (waiters: Waiter[]): Waiter | undefined => waiters.reduce<Waiter | undefined>((first, waiter) => (first === undefined || waiter.seq < first.seq ? waiter : first), undefined);
    const elsewhere = [...this.#homeless, ...this.#slots.filter((other) => other !== slot).flatMap((other) => other.queue)].filter((waiter) => waiter.expired);
    const expired = earliest(elsewhere.filter((waiter) => !this.#waitsForItsSummary(waiter)));
    const next = slot.queue[0];
    if (next !== undefined && (expired === undefined || next.seq < expired.seq)) return this.#start(slot, slot.queue.shift()!);
    // A turn behind its own summary comes last: it is not starved (its summary ends), and its re-read here would keep whoever else waits for as long.
    const first = expired ?? earliest(this.#homeless) ?? earliest(elsewhere);
    if (first !== undefined) this.#move(first, slot);
  }

  /** Whether a request that came before `waiter` waits past its bound (not for its own running summary). */
  #overdueBefore(waiter: Waiter): boolean {
    return [...this.#homeless, ...this.#slots.flatMap((slot) => slot.queue)].some((other) => other.expired && other.seq < waiter.seq && !this.#waitsForItsSummary(other));
  }

  /**
   * A turn whose conversation's summary runs now, with no file to restore
   * elsewhere: it waits for that summary, which holds the only current copy
   * of its history, not for a slot.
   */
  #waitsForItsSummary(waiter: Waiter): boolean {
    const { work } = waiter;
    return work.kind === 'turn' && !this.#keeper.canRestore(work) && this.#slots.some((slot) => isSummaryOf(slot.running, work.key));
  }

  /**
   * A request waited its bound (`#waitMsOf`): it takes a free slot if there
   * is one, else the first that frees. Also a turn behind its own
   * conversation's summary: moving re-reads the conversation (the summary's
   * slot holds its only current copy when there is no file to restore), but
   * waiting longer than that re-read would cost is worse (issue 33 item 4:
   * on a GPU a summary's generation takes tens of seconds, a re-read
   * seconds). A summary never makes its turn wait longer than that while a
   * slot stands free; a slot that frees goes to that turn only when nobody
   * else waits for it (its re-read there would make them wait as long).
   */
  #expire(waiter: Waiter): void {
    // Background work does not wait: the next crossing decides again. A summary a request waits for stays where it is.
    if (waiter.work.background?.() === true) return waiter.drop(new SlotWaitExpired());
    if (waiter.work.kind === 'summary') return;
    waiter.expired = true;
    const target = this.#freeSlot();
    if (target !== undefined) this.#move(waiter, target);
  }

  /** `waiter` runs in `target`, which becomes its conversation's home (a move when it had another). */
  #move(waiter: Waiter, target: Slot): void {
    if (this.#redirected(waiter, target)) return;
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
    const held = this.#held.indexOf(waiter);
    if (held !== -1) this.#held.splice(held, 1);
    for (const slot of this.#slots) {
      const index = slot.queue.indexOf(waiter);
      if (index !== -1) slot.queue.splice(index, 1);
    }
  }
}

/** `work` without the history it carries: what a slot keeps of the turn it runs. */
function withoutHistory(work: SlotWork): SlotWork {
  if (work.kind !== 'turn') return work;
  const { history: _history, ...bare } = work;
  return bare;
}
