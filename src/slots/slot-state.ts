import type { SlotFiles } from './slot-files.js';
import type { ChatMessage } from '../transcript/message.js';
import type { SlotActions, SlotWork } from './slot-keeper.js';

/**
 * The slot scheduler's state (scheduler.ts): a llama-server slot as the
 * scheduler sees it, a request waiting for one, the lease a request holds,
 * and the figures the metrics and the dashboard read.
 */

export interface SlotTimers {
  after(ms: number, run: () => void): () => void;
  readonly now: number;
}


export interface SlotLease {
  readonly slot: number;
  /** How long the request waited in its slot queue. */
  readonly waitedMs: number;
  /**
   * A summary's: the history its conversation's latest turn ran with while
   * the summary waited, which the slot then holds instead of the summary's
   * own (older) one; absent when no turn ran meanwhile. A suffix summary
   * asked over it reads none of the turns sent since it was written.
   */
  readonly history?: readonly ChatMessage[];
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
  /** Requests waiting for whichever slot frees first (no home, or their wait ran out), and background summaries waiting for a place in line: in no slot's queue. */
  readonly waitingForAny: number;
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

export interface Slot {
  readonly id: number;
  owner: string | null;
  /** Whose conversation the slot's KV holds (null: none, or a guest's). */
  holds: string | null;
  inFlight: boolean;
  /** What runs there now (null: nothing). */
  running: SlotWork | null;
  readonly queue: Waiter[];
  lastUsed: number;
  waits: number;
  waitMsTotal: number;
  waitMsMax: number;
}

/**
 * What ends a wait for a slot: an AbortSignal, or an exchange's abort
 * (upstream/exchange-abort.ts), whose AbortSignal is made only when asked
 * for: a request that gets its slot at once, or is not scheduled, makes
 * none (an AbortSignal per request was 1% of a small request's CPU).
 */
export type WaitAbort = AbortSignal | { readonly aborted: boolean; readonly signal: AbortSignal };

export function signalOf(abort: WaitAbort): AbortSignal {
  return abort instanceof AbortSignal ? abort : abort.signal;
}

/** A background summary waited `slot_wait_ms` for its slot: it leaves the queue (the next crossing decides again). */
export class SlotWaitExpired extends Error {
  constructor() {
    super('the summary waited upstream.slot_wait_ms for its slot: dropped, the next crossing decides again');
    this.name = 'SlotWaitExpired';
  }
}

export interface Waiter {
  readonly work: SlotWork;
  /** Leaves without a slot (its wait ran out). */
  readonly drop: (error: Error) => void;
  /** Its place in line: a turn takes its own waiting summary's. */
  seq: number;
  readonly since: number;
  expired: boolean;
  /** A waiting summary's: the latest history a turn of its conversation started with meanwhile (SlotLease.history). */
  history?: readonly ChatMessage[];
  /** A waiting turn's: the history it forwards (SlotWork.history), told to its conversation's summaries when it starts, then let go. */
  forwards?: readonly ChatMessage[] | undefined;
  cancel: () => void;
  readonly grant: (slot: Slot) => void;
}

export const REAL_TIMERS: SlotTimers = {
  after(ms, run) {
    const timer = setTimeout(run, ms);
    timer.unref();
    return () => clearTimeout(timer);
  },
  get now() {
    return performance.now();
  },
};

export function emptySlot(id: number): Slot {
  return { id, owner: null, holds: null, inFlight: false, running: null, queue: [], lastUsed: 0, waits: 0, waitMsTotal: 0, waitMsMax: 0 };
}

export interface SlotSchedulerOptions {
  readonly slots: number;
  readonly waitMs: number;
  readonly save: boolean;
  readonly saveMaxBytes: number;
  /** The slot files, when shared with other servers' schedulers (one --slot-save-path on a shared disk: upstream.slot_save_shared); else its own. */
  readonly files?: SlotFiles;
  readonly actions: SlotActions;
  readonly timers?: SlotTimers;
  /** Told when saving stops for good (the server refused a save). */
  readonly onSaveRefused?: () => void;
  /**
   * What reading `tokens` prompt tokens anew costs this server, in
   * milliseconds, at the prefill speed its answers reported (the server
   * speeds the ledger learns, src/upstream/server-speeds.ts); null before
   * any answer said. The bound of a turn's wait for its home slot.
   */
  readonly msToRead?: (tokens: number) => number | null;
  /**
   * How many background summaries may hold a place in line or a slot at
   * once (`compaction.summary.concurrency`); the others wait for a place, and
   * take it behind the requests that came meanwhile. Unset: no bound.
   */
  readonly backgroundInLine?: number;
}

/** A summary no request waits for (yet): it may wait for its place in line, and is dropped past its bound. */
export function isBackground(work: SlotWork | null): boolean {
  return work?.kind === 'summary' && work.background?.() === true;
}

export function isSummaryOf(work: SlotWork | null, key: string): boolean {
  return work?.kind === 'summary' && work.key === key;
}

export function viewOf(slot: Slot): SlotView {
  return { slot: slot.id, owner: slot.owner, inFlight: slot.inFlight, queued: slot.queue.length, waits: slot.waits, waitMsTotal: slot.waitMsTotal, waitMsMax: slot.waitMsMax };
}
