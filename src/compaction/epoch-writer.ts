import type { Config } from '../config/schema.js';
import type { ChatMessage } from '../transcript/message.js';
import { headLength } from '../transcript/groups.js';
import { estimateRequestTokens } from '../transcript/tokens.js';
import { SummaryFailedError } from '../errors.js';
import type { SummaryBackoff } from './backoff.js';
import type { Budget } from './budget.js';
import type { Decision } from './decide.js';
import type { Epoch, EpochStore } from './epochs/epoch-store.js';
import { leased } from './epochs/lease.js';
import type { CompactionObserver } from './observer.js';
import { type Candidate, trustedMarks } from './plan.js';
import { markedIndexesOf, replacementOf, truncationText } from './replacement.js';
import { summarizedLine, truncatedLine } from './report.js';
import { yieldOnLongHistory } from './long-history.js';
import { DROPPED, QueuePlace, Semaphore } from './semaphore.js';
import { type ChatCall, type SummaryProgress, SummaryError, summarize } from './summary/summarize.js';
import type { TokenRatios } from './token-ratio.js';
import type { CallHeaders } from './upstream-json.js';

/**
 * Writes the epoch a summary or steps decision makes: the summary call (at
 * most `summary.concurrency` at a time, with its timeout), the replacement,
 * the report, and the failure policy (`on_summary_failure`: a truncation
 * epoch, forward as is, or an error), with the back-off of a failing
 * conversation.
 */

/** A truncation stands for this long, then the summary is tried again. */
const TRUNCATION_TTL_MS = 5 * 60_000;

/**
 * How long a background summary may wait in line before it is no longer worth
 * its call. It exists so its conversation's crossing does not wait; when that
 * crossing comes, the request waiting for it promotes it (it is never dropped
 * then). A conversation that sent nothing for two minutes has paused or ended
 * (agents send their next request within seconds, people within a minute or
 * two), and the upstream's slot no longer holds its prompt, so the call would
 * re-read all of it for an epoch that may never apply: dropped, the place goes
 * to conversations that are active, and a later soft-zone request of this one
 * queues a fresh summary of the longer history.
 */
export const BACKGROUND_USEFUL_MS = 2 * 60_000;

export interface CompactionLogger {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
}

/** What a compaction needs to know of its request. */
export interface CompactionRequest {
  /** The prefix hash chain of the history as the client sent it. */
  readonly hashes: readonly string[];
  /** Whose conversation it is: ratios are learned per tenant. */
  readonly tenant: string;
  /** The history after oversized results were pruned. */
  readonly messages: ChatMessage[];
  readonly body: Readonly<Record<string, unknown>>;
  readonly model: string;
  readonly budget: Budget;
  /** The bytes/4 estimate of the request's tool definitions. */
  readonly toolsEstimate: number;
  /** The size of the history as the client sent it (tokens, with the learned ratio). */
  readonly originalSize: number;
  readonly headers: CallHeaders | undefined;
}

export type SummaryDecision = Extract<Decision, { kind: 'summarize' | 'steps' }>;

export interface EpochWriterOptions {
  readonly config: Config['compaction'];
  readonly chat: ChatCall;
  readonly store: EpochStore;
  readonly ratios: TokenRatios;
  readonly backoff: SummaryBackoff;
  readonly now: () => number;
  readonly logger: CompactionLogger | undefined;
  readonly observer: CompactionObserver | undefined;
  readonly summaryPrompt: string | undefined;
}

export interface WriteOptions {
  readonly signal: AbortSignal;
  readonly onProgress: ((line: string) => void) | undefined;
  /** Computed in the background: stored pending, and a failure leaves nothing behind. */
  readonly pending: boolean;
  /** Stored in use even when computed in the background: it replaces a truncation, which is never waited out. */
  readonly inUse?: boolean;
}

export class EpochWriter {
  readonly #options: EpochWriterOptions;
  readonly #summaryCalls: Semaphore;
  /** The places in line of background summaries, by epoch key: a request that comes to wait for one promotes it. */
  readonly #backgroundPlaces = new Map<string, QueuePlace>();

  constructor(options: EpochWriterOptions) {
    this.#options = options;
    this.#summaryCalls = new Semaphore({ limit: options.config.summary.concurrency, now: options.now, backgroundMaxWaitMs: BACKGROUND_USEFUL_MS });
  }

  /** A request now waits for the summary of `key`: if it is a background one still in line, it goes before the other background ones. */
  promote(key: string): void {
    this.#backgroundPlaces.get(key)?.promote();
  }

  /** Names a conversation by its prefix up to the first turn after the head: what a summary failure's back-off is kept by. */
  conversationOf(request: Pick<CompactionRequest, 'hashes' | 'messages'>): string {
    return request.hashes[Math.min(headLength(request.messages) + 1, request.messages.length)]!;
  }

  /**
   * Writes the notes for a summary or steps decision and stores the epoch they
   * make (pending when computed in the background). On failure it falls back
   * as `on_summary_failure` says: a truncation epoch, null (forward as is), or
   * a {@link SummaryFailedError}.
   *
   * Under the store's lease on the epoch's key: while another replica computes
   * it, a request waits for its epoch, and a background computation leaves it
   * to that replica (null).
   */
  write(request: CompactionRequest, candidate: Candidate, decision: SummaryDecision, options: WriteOptions): Promise<Epoch | null> {
    // The epoch's own key (the whole history its summary sees): the lease, and what the holder finds written when it is back.
    const { key } = seenWhole(request);
    const { signal, onProgress, pending } = options;
    return leased(this.#options.store, key, { signal, wait: !pending, onProgress }, () => this.#write(request, candidate, decision, options));
  }

  async #write(request: CompactionRequest, candidate: Candidate, decision: SummaryDecision, options: WriteOptions): Promise<Epoch | null> {
    const { chat, store, ratios, backoff, now, logger, observer, summaryPrompt, config } = this.#options;
    const { plan, boundary, counts } = decision;
    const { signal, onProgress, pending } = options;
    // The ratio as learned now: an exact count taken while deciding for this request may have corrected it.
    const ratio = ratios.get(request.model, request.tenant);
    // The summary request sees the whole candidate (suffix mode), so the epoch is keyed by the whole history.
    const { seenLength, key } = seenWhole(request);
    const conversation = this.conversationOf(request);
    const started = now();
    const sizeOfMessages = (messages: readonly ChatMessage[], withTools: boolean): number =>
      (estimateRequestTokens({ messages }) + (withTools ? request.toolsEstimate : 0)) * ratio;
    const rest = candidate.messages.slice(boundary.candidateEnd);
    const earlierNotes = candidate.epoch?.notes ?? null;
    // Where the new replacement carries compactor's own messages: the only places its marks will be trusted.
    const marked = markedIndexesOf(candidate.messages, plan, boundary.candidateEnd, trustedMarks(candidate));
    // Written from the original messages beneath a truncation, it is in use at once (it replaces the truncation);
    // keyed by the whole history, which contains the truncation's, the lookup finds it before the truncation.
    const stored = async (epoch: Epoch): Promise<Epoch> => {
      await store.save(pending && options.inUse !== true ? { ...epoch, pending: true } : epoch);
      return epoch;
    };

    onProgress?.(`compacting ${counts.old} messages`);
    await yieldOnLongHistory(candidate.messages.length);
    let failure: string;
    let timedOut = false;
    // A request within a failure's back-off tries no summary: it is no compaction of its own, unless it makes a truncation.
    const tried = !backoff.has(conversation);
    if (!tried) {
      failure = 'the summary failed less than a minute ago';
    } else {
      // The timeout counts from the call, not from the place in line: a queue is no reason to give up.
      let timeout: AbortSignal | undefined;
      let callStarted = started;
      const place = new QueuePlace(pending ? 'background' : 'foreground');
      if (pending) this.#backgroundPlaces.set(key, place);
      try {
        const result = await this.#summaryCalls.use(() => {
          const callTimeout = AbortSignal.timeout(config.summary.timeout_ms);
          timeout = callTimeout;
          callStarted = now();
          return summarize(
            {
              body: request.body,
              candidate: candidate.messages,
              head: headLength(candidate.messages),
              cut: plan.cut,
              marked: trustedMarks(candidate),
              earlierNotes,
              window: request.budget.window,
              sizeOfMessages,
              model: config.summary.model ?? request.model,
              maxTokens: request.budget.summaryTokens,
              ...(summaryPrompt === undefined ? {} : { systemPrompt: summaryPrompt }),
              signal: AbortSignal.any([signal, callTimeout]),
              onProgress: (progress: SummaryProgress) => onProgress?.(progressLine(progress)),
              // The conversation's name is its home slot's key too (src/slots/conversation-key.ts).
              slotKey: conversation,
            },
            (body, callSignal, _headers, slot) => chat(body, callSignal, request.headers, slot),
          );
        }, place);
        if (result === DROPPED) {
          logger?.info({ model: request.model, waitedMs: now() - started }, 'background summary dropped: it waited in line longer than it is useful');
          return null;
        }
        backoff.forget(conversation);
        const replacement = replacementOf(candidate.messages, plan, boundary.candidateEnd, result.notes, 'summary');
        const after = sizeOfMessages([...replacement, ...rest], true);
        const report = summarizedLine({ old: counts.old, kept: counts.kept, before: request.originalSize, after, milliseconds: now() - started });
        logger?.info({ model: request.model, tier: plan.tier, mode: result.mode, calls: result.calls, pending }, report);
        observer?.summary({ milliseconds: now() - callStarted, outcome: 'ok', calls: result.calls });
        observer?.compaction({ model: request.model, tier: plan.tier, outcome: pending ? 'prepared' : 'compacted', tokensBefore: request.originalSize, tokensAfter: after, pending });
        return await stored({ key, sourceLength: boundary.sourceLength, seenLength, replacement, marked, notes: result.notes, strategy: plan.tier, report });
      } catch (error) {
        if (signal.aborted && timeout?.aborted !== true) throw error;
        timedOut = timeout?.aborted === true;
        failure = timedOut ? `the summary timed out after ${config.summary.timeout_ms} ms` : error instanceof SummaryError ? error.message : String(error);
        backoff.note(conversation);
        logger?.warn({ model: request.model, reason: failure }, 'summary failed');
        observer?.summary({ milliseconds: now() - callStarted, outcome: timedOut ? 'timeout' : 'failed', calls: error instanceof SummaryError ? error.calls : 1 });
      } finally {
        if (this.#backgroundPlaces.get(key) === place) this.#backgroundPlaces.delete(key);
      }
    }

    // A background epoch that failed leaves nothing behind: the request that crosses the threshold decides.
    const counted = (outcome: 'failed' | 'forwarded'): void => {
      if (tried) observer?.compaction({ model: request.model, tier: plan.tier, outcome, tokensBefore: request.originalSize, tokensAfter: request.originalSize, pending });
    };
    if (pending) {
      counted('failed');
      return null;
    }
    switch (config.on_summary_failure) {
      case 'forward':
        counted('forwarded');
        return null;
      case 'error':
        counted('failed');
        throw new SummaryFailedError(failure, timedOut);
      case 'truncate': {
        const replacement = replacementOf(candidate.messages, plan, boundary.candidateEnd, truncationText(counts.old, plan.tier, earlierNotes), 'truncated');
        const after = sizeOfMessages([...replacement, ...rest], true);
        const report = truncatedLine({ dropped: counts.old, kept: counts.kept, before: request.originalSize, after, reason: failure });
        logger?.info({ model: request.model, outcome: 'truncated' }, report);
        observer?.compaction({ model: request.model, tier: plan.tier, outcome: 'truncated', tokensBefore: request.originalSize, tokensAfter: after, pending: false });
        return stored({ key, sourceLength: boundary.sourceLength, seenLength, replacement, marked, notes: earlierNotes, strategy: 'truncated', report, expiresAt: now() + TRUNCATION_TTL_MS });
      }
    }
  }
}

/**
 * What a summary epoch of this request is written from, and so keyed by: the
 * whole history (a suffix-mode request is the whole candidate, a prefix of
 * what the upstream's slot holds; the epoch in use it starts from was itself
 * written from a prefix of this history). Also its single-flight key.
 */
export function seenWhole(request: Pick<CompactionRequest, 'hashes' | 'messages'>): { seenLength: number; key: string } {
  const seenLength = request.messages.length;
  return { seenLength, key: request.hashes[seenLength]! };
}

function progressLine(progress: SummaryProgress): string {
  const chunk = progress.chunks > 1 ? ` (chunk ${progress.chunk}/${progress.chunks})` : '';
  return `compacting ${progress.messages} messages${chunk}`;
}
