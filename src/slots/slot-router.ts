import type { Config } from '../config/schema.js';
import { slotCountOf } from './discovery.js';
import { type SlotActions, type SlotLease, SlotScheduler, type SlotStats, type SlotWork, type WaitAbort } from './scheduler.js';
import { signalOf } from './slot-state.js';
import { type SlotLeases, withSharedLease } from './slot-leases.js';
import type { SlotFiles } from './slot-files.js';

/**
 * The slot scheduler at the upstream's edge: finds out per model whether the
 * upstream has slots (`/props` `total_slots`, else `/slots`), keeps one
 * scheduler per served model (`model_path`: a single-model llama-server
 * serves every name from the same slots), and does the slot actions over
 * HTTP. A model whose server reports no slots, or that cannot be asked, is
 * not scheduled (asked again after a minute).
 */

export interface SlotUpstream {
  getJson(path: string, options?: { timeoutMs?: number }): Promise<unknown>;
  postJson(path: string, body: unknown, options?: { timeoutMs?: number }): Promise<unknown>;
}

export interface SlotLog {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
}

export interface SlotRouterOptions {
  readonly upstream: SlotUpstream;
  /** Leases of each slot in a store shared by replicas (slot-leases.ts), named under `name` (the server); absent: this replica alone. */
  readonly leases?: { readonly store: SlotLeases; readonly name: string };
  readonly config: Pick<Config['upstream'], 'slots' | 'slot_wait_ms' | 'slot_save' | 'slot_save_max_bytes'>;
  /** The slot files every server of a fleet shares (upstream.slot_save_shared): a conversation saved on one is restored on another. */
  readonly files?: SlotFiles;
  readonly log?: SlotLog;
  readonly now?: () => number;
  /** What reading `tokens` prompt tokens anew costs `model`'s server, in milliseconds (its learned prefill speed), or null before it is known. */
  readonly msToRead?: (model: string, tokens: number) => number | null;
  /** How many background summaries may hold a place in a server's slot queues at once (`compaction.summary.concurrency`). */
  readonly backgroundInLine?: number;
}

// A llama-server answers /props at once; a slow answer is no reason to hold a request back.
const DISCOVERY_TIMEOUT_MS = 2_000;
// Like the window lookup: a server restarted with another -np is seen within a minute.
const RETRY_AFTER_MS = 60_000;
// A save or restore of a long slot with a big model writes gigabytes: seconds on a slow disk.
const ACTION_TIMEOUT_MS = 60_000;

export class SlotRouter {
  readonly #options: SlotRouterOptions;
  readonly #byModel = new Map<string, { readonly at: number; readonly scheduler: Promise<SlotScheduler | null>; found?: boolean }>();
  readonly #byServed = new Map<string, SlotScheduler>();
  /** The served model of each scheduler: what its slots' shared leases are named by. */
  readonly #servedOf = new Map<SlotScheduler, string>();

  constructor(options: SlotRouterOptions) {
    this.#options = options;
  }

  get enabled(): boolean {
    return this.#options.config.slots === 'auto';
  }

  /** A slot for `work` on `model`'s server, or null when it is not scheduled. */
  async acquire(model: string, work: SlotWork, abort?: WaitAbort): Promise<SlotLease | null> {
    if (!this.enabled) return null;
    const scheduler = await this.#schedulerOf(model);
    if (scheduler === null) return null;
    const lease = await scheduler.acquire(work, abort);
    const { leases } = this.#options;
    return leases === undefined ? lease : withSharedLease(lease, `${leases.name}:${this.#servedOf.get(scheduler) ?? model}`, leases.store, abort === undefined ? undefined : signalOf(abort));
  }

  /**
   * Whether `model`'s server was found with no slots to schedule (one slot without `slot_save`, or none) and is not
   * due to be asked again: its requests wait for no slot, and need not await {@link acquire} to learn it (issue 40:
   * the promises of the slot pin on every request to such a server).
   */
  unscheduled(model: string): boolean {
    const known = this.#byModel.get(model);
    return known?.found === false && (this.#options.now ?? Date.now)() - known.at < RETRY_AFTER_MS;
  }

  /** Every scheduler's figures, by served model (metrics, dashboard). */
  stats(): Array<{ readonly served: string; readonly stats: SlotStats }> {
    return [...this.#byServed].map(([served, scheduler]) => ({ served, stats: scheduler.stats() }));
  }

  #schedulerOf(model: string): Promise<SlotScheduler | null> {
    const known = this.#byModel.get(model);
    // A server found with slots keeps them; one found without is asked again after a while.
    if (known !== undefined && (known.found !== false || this.unscheduled(model))) return known.scheduler;
    const entry: { at: number; scheduler: Promise<SlotScheduler | null>; found?: boolean } = { at: (this.#options.now ?? Date.now)(), scheduler: this.#discover(model) };
    void entry.scheduler.then((scheduler) => {
      entry.found = scheduler !== null;
    });
    this.#byModel.set(model, entry);
    return entry.scheduler;
  }

  async #discover(model: string): Promise<SlotScheduler | null> {
    const { upstream, log } = this.#options;
    const props = await upstream.getJson(`/props?model=${encodeURIComponent(model)}`, { timeoutMs: DISCOVERY_TIMEOUT_MS }).catch(() => undefined);
    const slots = slotCountOf(props, undefined) === null ? await upstream.getJson('/slots', { timeoutMs: DISCOVERY_TIMEOUT_MS }).catch(() => undefined) : undefined;
    const count = slotCountOf(props, slots);
    if (count === null) {
      log?.info({ model }, 'upstream.slots: the upstream reports no slots (/props total_slots, /slots): llama-server picks the slot');
      return null;
    }
    // One slot: llama-server already runs one request at a time there; only saving evicted conversations adds anything.
    if (count < 2 && !this.#options.config.slot_save) return null;
    const path = (props as { model_path?: unknown } | undefined)?.model_path;
    const served = typeof path === 'string' ? path : model;
    const existing = this.#byServed.get(served);
    if (existing !== undefined) return existing;
    const scheduler = this.#create(count, served, model);
    this.#byServed.set(served, scheduler);
    this.#servedOf.set(scheduler, served);
    log?.info({ model, slots: count, save: this.#options.config.slot_save }, `upstream.slots: ${count} slots, one conversation per slot`);
    return scheduler;
  }

  /** `model`: the name it was found by, whose learned prefill speed bounds a turn's wait (every name of one served model runs at one speed). */
  #create(count: number, served: string, model: string): SlotScheduler {
    const { config, log, msToRead, backgroundInLine } = this.#options;
    return new SlotScheduler({
      slots: count,
      waitMs: config.slot_wait_ms,
      save: config.slot_save,
      saveMaxBytes: config.slot_save_max_bytes,
      ...(this.#options.files === undefined ? {} : { files: this.#options.files }),
      actions: this.#actions(),
      ...(msToRead === undefined ? {} : { msToRead: (tokens: number) => msToRead(model, tokens) }),
      ...(backgroundInLine === undefined ? {} : { backgroundInLine }),
      onSaveRefused: () =>
        log?.warn({ served }, 'upstream.slot_save: llama-server refused to save a slot (was it started with --slot-save-path?); saving stopped, its RAM cache is relied on'),
    });
  }

  #actions(): SlotActions {
    const { upstream } = this.#options;
    const action = (slot: number, name: string, body: unknown): Promise<Record<string, unknown> | null> =>
      upstream.postJson(`/slots/${slot}?action=${name}`, body, { timeoutMs: ACTION_TIMEOUT_MS }).then(
        (answer) => (typeof answer === 'object' && answer !== null ? (answer as Record<string, unknown>) : null),
        () => null,
      );
    return {
      save: async (slot, filename) => {
        const answer = await action(slot, 'save', { filename });
        const written = answer?.['n_written'];
        return typeof written === 'number' ? written : null;
      },
      restore: async (slot, filename) => (await action(slot, 'restore', { filename })) !== null,
      erase: async (slot) => (await action(slot, 'erase', {})) !== null,
    };
  }
}
