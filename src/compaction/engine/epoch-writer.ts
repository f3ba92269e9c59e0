import type { Config } from '../../config/schema.js';
import { headLength } from '../../transcript/groups.js';
import { estimateRequestTokens } from '../../transcript/tokens.js';
import { SummaryFailedError } from '../../errors.js';
import type { SummaryBackoff } from '../summary-calls/backoff.js';
import type { Epoch } from '../types.js';
import { conversationOf, type EpochRepository } from '../epochs/repository.js';
import type { ChatCall, CompactionLogger, CompactionObserver } from '../ports.js';
import { type Candidate, trustedMarks } from '../policy/plan.js';
import { withFilesThatFit } from '../policy/working-set.js';
import { TRUNCATED, tierNamed } from '../policy/tiers/list.js';
import type { ModelDecision, ModelTier, TierList } from '../policy/tiers/tier.js';
import { type CompactionRequest, seenWhole } from './request.js';
import { yieldOnLongHistory } from './long-history.js';
import { BACKGROUND_USEFUL_MS, QueuePlace } from '../summary-calls/queue-place.js';
import { SummaryQueue, NotRun, STALE_LIMIT } from '../summary-calls/summary-queue.js';
import { SummaryError, type SummaryResult, summarize } from '../summary/summarize.js';
import type { SummaryProgress } from '../types.js';
import type { TokenRatios } from '../sizes/token-ratio.js';
import type { ChatMessage } from '../../transcript/message.js';

/**
 * Writes the epoch a decision of a tier that needs the model makes (a summary
 * of old turns or of old steps): the summary call (at most
 * `summary.concurrency` at a time, with its timeout), the tier's replacement
 * and report words, and the failure policy (`on_summary_failure`: a
 * truncation epoch, forward as is, or an error), with the back-off of a
 * failing conversation.
 */

/** A truncation stands for this long, then the summary is tried again. */
const TRUNCATION_TTL_MS = 5 * 60_000;

export interface EpochWriterOptions {
  readonly config: Config['compaction'];
  readonly chat: ChatCall;
  readonly epochs: EpochRepository;
  readonly ratios: TokenRatios;
  readonly backoff: SummaryBackoff;
  readonly now: () => number;
  readonly logger: CompactionLogger | undefined;
  readonly observer: CompactionObserver | undefined;
  readonly summaryPrompt: string | undefined;
  /** When the window learned from a refusal of a model expires (undefined: none stands): a truncation made under it expires with it. */
  readonly learnedWindowUntil?: (model: string) => number | undefined;
  /** The tiers the engine compacts with: a decision's tier writes its replacement and report words. */
  readonly tiers: TierList;
}

export interface WriteOptions {
  readonly signal: AbortSignal;
  readonly onProgress: ((line: string) => void) | undefined;
  /** Computed in the background: stored pending, and a failure leaves nothing behind. */
  readonly pending: boolean;
  /** Stored in use even when computed in the background: it replaces a truncation, which is never waited out. */
  readonly inUse?: boolean;
}

/** What one write works from. */
interface WriteJob {
  readonly request: CompactionRequest;
  readonly candidate: Candidate;
  readonly decision: ModelDecision;
  /** The decision's tier: its replacement, marks and report words. */
  readonly tier: ModelTier;
  readonly options: WriteOptions;
  /** The epoch's key: the whole history its summary sees. */
  readonly key: string;
  readonly seenLength: number;
  /** What a failure's back-off is kept by. */
  readonly conversation: string;
  readonly started: number;
  /** Size in real tokens of messages, with the ratio as learned when the write began. */
  readonly sizeOfMessages: (messages: readonly ChatMessage[], withTools: boolean) => number;
  /** The candidate's messages after the cut's boundary: forwarded after the replacement. */
  readonly rest: readonly ChatMessage[];
  readonly earlierNotes: string | null;
  readonly marked: number[];
}

type CallOutcome =
  | { readonly kind: 'written'; readonly result: SummaryResult; readonly callStarted: number }
  | { readonly kind: 'dropped' }
  | { readonly kind: 'failed'; readonly failure: string; readonly timedOut: boolean };

export class EpochWriter {
  readonly #options: EpochWriterOptions;
  readonly #summaryCalls: SummaryQueue;
  /** The places in line of background summaries, by epoch key: a request that comes to wait for one promotes it. */
  readonly #backgroundPlaces = new Map<string, QueuePlace>();

  constructor(options: EpochWriterOptions) {
    this.#options = options;
    const { concurrency: limit, max_queued_per_tenant: maxQueuedPerTenant, max_queued_background: maxQueuedBackground } = options.config.summary;
    const onDrop = (dropped: string): void => options.observer?.summaryDropped?.(dropped);
    this.#summaryCalls = new SummaryQueue({ limit, maxQueuedPerTenant, maxQueuedBackground, now: options.now, backgroundMaxWaitMs: BACKGROUND_USEFUL_MS, onDrop });
  }

  /** Summaries waiting for a slot now. */
  get queued(): number {
    return this.#summaryCalls.waiting;
  }

  /** A truncation stands for its TTL, or until the learned window it was cut for expires, whichever comes first. */
  #truncationExpiry(model: string): number {
    return Math.min(this.#options.now() + TRUNCATION_TTL_MS, this.#options.learnedWindowUntil?.(model) ?? Number.POSITIVE_INFINITY);
  }

  /** A request now waits for the summary of `key`: if it is a background one still in line, it goes before the other background ones. */
  promote(key: string): void {
    this.#backgroundPlaces.get(key)?.promote();
  }

  /** Names a conversation by its prefix up to the first turn after the head: what a summary failure's back-off is kept by. */
  conversationOf(request: Pick<CompactionRequest, 'hashes' | 'messages'>): string {
    return conversationOf(request);
  }

  /**
   * Writes the notes for a decision of a tier that needs the model and stores the epoch they
   * make (pending when computed in the background). On failure it falls back
   * as `on_summary_failure` says: a truncation epoch, null (forward as is), or
   * a {@link SummaryFailedError}.
   *
   * Under the store's lease on the epoch's key: while another replica computes
   * it, a request waits for its epoch, and a background computation leaves it
   * to that replica (null).
   */
  write(request: CompactionRequest, candidate: Candidate, decision: ModelDecision, options: WriteOptions): Promise<Epoch | null> {
    // The epoch's own key (the whole history its summary sees): the lease, and what the holder finds written when it is back.
    const { key } = seenWhole(request);
    const { signal, onProgress, pending } = options;
    return this.#options.epochs.forHistory(request).leased(key, { signal, wait: !pending, onProgress }, () => this.#write(request, candidate, decision, options));
  }

  async #write(request: CompactionRequest, candidate: Candidate, decision: ModelDecision, options: WriteOptions): Promise<Epoch | null> {
    const job = this.#jobOf(request, candidate, decision, options);
    options.onProgress?.(`compacting ${decision.counts.old} messages`);
    await yieldOnLongHistory(candidate.messages.length);
    // A request within a failure's back-off tries no summary: it is no compaction of its own, unless it makes a truncation.
    if (this.#options.backoff.has(job.conversation)) return this.#fallBack(job, { failure: 'the summary failed less than a minute ago', timedOut: false, tried: false });
    const called = await this.#call(job);
    if (called.kind === 'dropped') return null;
    if (called.kind === 'failed') return this.#fallBack(job, { ...called, tried: true });
    return this.#record(job, called.result, called.callStarted);
  }

  /** What one write works from, worked out once. */
  #jobOf(request: CompactionRequest, candidate: Candidate, decision: ModelDecision, options: WriteOptions): WriteJob {
    // The ratio as learned now: an exact count taken while deciding for this request may have corrected it.
    const ratio = this.#options.ratios.get(request.model, request.tenant);
    // The summary request sees the whole candidate (suffix mode), so the epoch is keyed by the whole history.
    const { seenLength, key } = seenWhole(request);
    const tier = tierNamed(this.#options.tiers, decision.kind);
    if (tier === undefined || !tier.needsModel) throw new Error(`no tier that needs the model is named ${decision.kind}`);
    return {
      request,
      candidate,
      decision,
      tier,
      options,
      key,
      seenLength,
      conversation: this.conversationOf(request),
      started: this.#options.now(),
      sizeOfMessages: (messages, withTools) => (estimateRequestTokens({ messages }) + (withTools ? request.toolsEstimate : 0)) * ratio,
      rest: candidate.messages.slice(decision.boundary.candidateEnd),
      earlierNotes: candidate.epoch?.notes ?? null,
      // Where the new replacement carries compactor's own messages: the only places its marks will be trusted.
      marked: tier.markedIndexesOf(candidate.messages, decision.plan, decision.boundary.candidateEnd, trustedMarks(candidate)),
    };
  }

  /** The summary call: its place in line, its timeout (from the call, not from the place in line: a queue is no reason to give up), its back-off and its metrics. */
  async #call(job: WriteJob): Promise<CallOutcome> {
    const { chat, backoff, now, logger, observer, summaryPrompt, config } = this.#options;
    const { request, candidate, decision, key, started } = job;
    const { signal, onProgress, pending } = job.options;
    let timeout: AbortSignal | undefined;
    let callStarted = started;
    const place = new QueuePlace(pending ? 'background' : 'foreground');
    if (pending) this.#backgroundPlaces.set(key, place);
    try {
      const result = await this.#summaryCalls.use(request.tenant, () => {
        const callTimeout = AbortSignal.timeout(config.summary.timeout_ms);
        timeout = callTimeout;
        callStarted = now();
        return summarize(
          {
            body: request.body,
            candidate: candidate.messages,
            head: headLength(candidate.messages),
            cut: decision.plan.cut,
            marked: trustedMarks(candidate),
            earlierNotes: job.earlierNotes,
            ...(decision.plan.workingSet === undefined ? {} : { keptFiles: decision.plan.workingSet.map((file) => file.file) }),
            window: request.budget.window,
            sizeOfMessages: job.sizeOfMessages,
            model: config.summary.model ?? request.model,
            maxTokens: request.budget.summaryTokens,
            ...(summaryPrompt === undefined ? {} : { systemPrompt: summaryPrompt }),
            ...(request.summaryInstructions === undefined ? {} : { instructions: request.summaryInstructions }),
            signal: AbortSignal.any([signal, callTimeout]),
            onProgress: (progress: SummaryProgress) => onProgress?.(progressLine(progress)),
            // The conversation's name is its home slot's key too (src/slots/conversation-key.ts).
            slotKey: this.conversationOf(request),
            place,
          },
          (body, callSignal, _headers, slot) => chat(body, callSignal, request.headers, slot),
        );
      }, place);
      if (result instanceof NotRun) {
        const line = result.dropped === STALE_LIMIT ? `${result.dropped}: dropped` : `summary not queued: over ${result.dropped}`;
        if (pending) {
          logger?.info({ model: request.model, waitedMs: now() - started, limit: result.dropped }, line);
          return { kind: 'dropped' };
        }
        // A refusal for fairness says nothing of the upstream: no back-off, no failed summary call (the drop is counted).
        logger?.info({ model: request.model, limit: result.dropped }, line);
        return { kind: 'failed', failure: `${line} (${this.#summaryCalls.waiting} summaries waiting)`, timedOut: false };
      }
      backoff.forget(job.conversation);
      return { kind: 'written', result, callStarted };
    } catch (error) {
      if (signal.aborted && timeout?.aborted !== true) throw error;
      const timedOut = timeout?.aborted === true;
      const failure = timedOut ? `the summary timed out after ${config.summary.timeout_ms} ms` : error instanceof SummaryError ? error.message : String(error);
      backoff.note(job.conversation);
      logger?.warn({ model: request.model, reason: failure }, 'summary failed');
      observer?.summary({ milliseconds: now() - callStarted, outcome: timedOut ? 'timeout' : 'failed', calls: error instanceof SummaryError ? error.calls : 1 });
      return { kind: 'failed', failure, timedOut };
    } finally {
      if (this.#backgroundPlaces.get(key) === place) this.#backgroundPlaces.delete(key);
    }
  }

  /** A summary written: its epoch made, reported, counted and stored. */
  async #record(job: WriteJob, result: SummaryResult, callStarted: number): Promise<Epoch> {
    const { now, logger, observer } = this.#options;
    const { request, candidate, decision, tier, started } = job;
    const { boundary } = decision;
    const { pending } = job.options;
    const budget = request.budget.tokens;
    const replacementOf = (plan: typeof decision.plan): ChatMessage[] => tier.replacementOf(candidate.messages, plan, boundary.candidateEnd, result.notes, 'notes');
    // The notes are written now: files of the working set left out for notes at their largest go in if these leave room.
    const plan = budget === null ? decision.plan : withFilesThatFit(decision.plan, (wider) => job.sizeOfMessages([...replacementOf(wider), ...job.rest], true) <= budget);
    const replacement = replacementOf(plan);
    const after = job.sizeOfMessages([...replacement, ...job.rest], true);
    const report = tier.summarizedLine(decision, { before: request.originalSize, after, milliseconds: now() - started });
    logger?.info({ model: request.model, tier: plan.tier, mode: result.mode, calls: result.calls, pending }, report);
    observer?.summary({ milliseconds: now() - callStarted, outcome: 'ok', calls: result.calls });
    const written = { tenant: request.tenant, messages: request.messages, hashes: request.hashes, report, milliseconds: now() - started, notes: result.notes };
    observer?.compaction({ model: request.model, tier: plan.tier, outcome: pending ? 'prepared' : 'compacted', tokensBefore: request.originalSize, tokensAfter: after, pending, written });
    return this.#stored(job, epochOf(job, { replacement, notes: result.notes, strategy: plan.tier as Epoch['strategy'], report }));
  }

  /** No summary (it failed, or the back-off holds it): what `on_summary_failure` says; a background epoch that failed leaves nothing behind. */
  async #fallBack(job: WriteJob, why: { failure: string; timedOut: boolean; tried: boolean }): Promise<Epoch | null> {
    const { now, logger, observer, config } = this.#options;
    const { request, candidate, decision, tier } = job;
    const { plan, boundary, counts } = decision;
    const counted = (outcome: 'failed' | 'forwarded'): void => {
      if (why.tried) observer?.compaction({ model: request.model, tier: plan.tier, outcome, tokensBefore: request.originalSize, tokensAfter: request.originalSize, pending: job.options.pending });
    };
    // The request that crosses the threshold decides.
    if (job.options.pending) {
      counted('failed');
      return null;
    }
    switch (config.on_summary_failure) {
      case 'forward':
        counted('forwarded');
        return null;
      case 'error':
        counted('failed');
        throw new SummaryFailedError(why.failure, why.timedOut);
      case 'truncate': {
        const replacement = tier.replacementOf(candidate.messages, plan, boundary.candidateEnd, tier.truncationText(counts.old, job.earlierNotes), 'truncated');
        const after = job.sizeOfMessages([...replacement, ...job.rest], true);
        const report = tier.truncatedLine(decision, { before: request.originalSize, after, reason: why.failure });
        logger?.info({ model: request.model, outcome: 'truncated' }, report);
        const written = { tenant: request.tenant, messages: request.messages, hashes: request.hashes, report, milliseconds: now() - job.started, notes: null };
        observer?.compaction({ model: request.model, tier: plan.tier, outcome: 'truncated', tokensBefore: request.originalSize, tokensAfter: after, pending: false, written });
        const epoch = epochOf(job, { replacement, notes: job.earlierNotes, strategy: TRUNCATED, report });
        return this.#stored(job, { ...epoch, expiresAt: this.#truncationExpiry(request.model) });
      }
    }
  }

  /**
   * Saved, pending when computed in the background. Written from the original messages beneath a truncation, it is in
   * use at once (it replaces the truncation); keyed by the whole history, which contains the truncation's, the lookup
   * finds it before the truncation.
   */
  async #stored(job: WriteJob, epoch: Epoch): Promise<Epoch> {
    const { pending, inUse } = job.options;
    await this.#options.epochs.forHistory(job.request).save(pending && inUse !== true ? { ...epoch, pending: true } : epoch);
    return epoch;
  }
}

/** The epoch a write stores: keyed by the whole history its summary saw, covering the decision's boundary. */
function epochOf(job: WriteJob, made: Pick<Epoch, 'replacement' | 'notes' | 'strategy' | 'report'>): Epoch {
  return { key: job.key, sourceLength: job.decision.boundary.sourceLength, seenLength: job.seenLength, replacement: made.replacement, marked: job.marked, notes: made.notes, strategy: made.strategy, report: made.report };
}

function progressLine(progress: SummaryProgress): string {
  const chunk = progress.chunks > 1 ? ` (chunk ${progress.chunk}/${progress.chunks})` : '';
  return `compacting ${progress.messages} messages${chunk}`;
}
