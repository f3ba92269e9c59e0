import { setImmediate as nextTurnOfTheEventLoop } from 'node:timers/promises';
import type { Config, ModelConfig } from '../config/schema.js';
import type { ChatMessage } from '../transcript/message.js';
import { headLength } from '../transcript/groups.js';
import { mark } from '../transcript/marks.js';
import { pruneToolResults } from '../transcript/prune.js';
import { estimateMessageTokens, estimateToolsTokens } from '../transcript/tokens.js';
import { ContextWindows } from './context-window.js';
import { ContextLengthExceededError, SummaryFailedError } from '../errors.js';
import { type Epoch, type EpochStore, MemoryEpochStore } from './epochs/epoch-store.js';
import { ExactCounter } from './exact-count.js';
import type { CompactionObserver } from './observer.js';
import {
  type Candidate,
  type CompactionPlan,
  type CompactionSettings,
  type Sizes,
  type Trigger,
  candidateOf,
  epochBoundary,
  planCompaction,
  summaryPairTokens,
  totalSize,
  triggerOf,
} from './plan.js';
import { planSteps, type StepsPlan, withNotes } from './plan-steps.js';
import { prefixHashes } from './epochs/prefix-hash.js';
import { summaryPair, truncationNotice, truncationText } from './replacement.js';
import { prunedLine, reusedLine, summarizedLine, truncatedLine } from './report.js';
import { Semaphore } from './semaphore.js';
import { SingleFlight } from './epochs/single-flight.js';
import { type ChatCall, type SummaryProgress, SummaryError, summarize } from './summarize.js';
import { TokenRatios } from './token-ratio.js';
import type { CallHeaders, UpstreamJson } from './upstream-json.js';

/**
 * The compaction engine: decides, per chat request, what is forwarded.
 *
 * It is stateless towards the client (which keeps sending its whole history)
 * and remembers, per conversation prefix, what it replaced that prefix with
 * (an epoch), so the same history is always rewritten the same way: one
 * summary per epoch, and a forwarded prompt whose beginning stays
 * byte-identical from request to request.
 */

/** Within this fraction of a threshold an estimate is not trusted and the upstream is asked for the exact count. */
const EXACT_COUNT_BAND = 0.3;

/** A truncation stands for this long, then the summary is tried again. */
const TRUNCATION_TTL_MS = 5 * 60_000;

/** A conversation whose summary failed is not tried again sooner than this, so a broken summarizer is not hammered. */
const FAILURE_BACKOFF_MS = 60_000;

/** Below this, pruning an oversized result would leave too little of it to be of use. */
const MIN_OVERSIZED_RESULT_CHARS = 1024;

/**
 * From this many messages on, each pass over a history (validating, hashing,
 * sizing, rendering) takes tens of milliseconds; the engine lets the event
 * loop run between passes so other requests' streams do not stall behind it.
 */
const LONG_HISTORY_MESSAGES = 5_000;

async function yieldOnLongHistory(messageCount: number): Promise<void> {
  if (messageCount >= LONG_HISTORY_MESSAGES) await nextTurnOfTheEventLoop();
}

/** How many times a request waits for a running compaction of its conversation and plans again before planning regardless. */
const MAX_WAITS = 3;

export interface CompactionLogger {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
}

export interface CompactorOptions {
  readonly config: Config;
  /** The upstream's JSON surface: window discovery and exact counts. */
  readonly upstream: UpstreamJson;
  /** One non-streamed chat completion for summaries (the summary upstream, when configured). */
  readonly chat: ChatCall;
  readonly store?: EpochStore;
  readonly now?: () => number;
  readonly logger?: CompactionLogger;
  /** The summary system prompt (the contents of `summary.prompt_file`), when replaced. */
  readonly summaryPrompt?: string;
  /** Told of each compaction, summary and epoch lookup (the metrics). */
  readonly observer?: CompactionObserver;
}

export interface PrepareInput {
  /** The parsed request body. */
  readonly body: Readonly<Record<string, unknown>>;
  /** The history after pair handling. */
  readonly messages: ChatMessage[];
  /** Names the client's credential; epochs are never shared across tenants. */
  readonly tenant: string;
  /** Aborts when the client goes away. */
  readonly signal: AbortSignal;
  /** Told while the request waits for a summary (`compacting 84 messages (chunk 2/3)`). */
  readonly onProgress?: (line: string) => void;
  /** Headers for the upstream calls made for this request (the client's credential when no upstream key is set). */
  readonly upstreamHeaders?: CallHeaders | undefined;
}

export interface Prepared {
  /** What to forward: the input array itself when nothing changed. */
  readonly messages: ChatMessage[];
  readonly changed: boolean;
  /** The compaction line for logs and the `x-compactor` header, or null. */
  readonly report: string | null;
  /** The bytes/4 estimate of the forwarded prompt, before any ratio: what the upstream's count is learned against. */
  readonly estimate: number;
  /** Work to start once the answer has been streamed (the next epoch, prepared in the background). */
  readonly afterResponse?: () => void;
}

interface Budget {
  readonly model: string;
  readonly window: number | null;
  readonly reserve: number;
  readonly budget: number | null;
}

function numberField(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : 0;
}

export class Compactor {
  readonly windows: ContextWindows;
  readonly ratios = new TokenRatios();
  readonly #config: Config;
  readonly #settings: CompactionSettings;
  readonly #store: EpochStore;
  readonly #counter: ExactCounter;
  readonly #chat: ChatCall;
  readonly #now: () => number;
  readonly #logger: CompactionLogger | undefined;
  readonly #summaryPrompt: string | undefined;
  readonly #observer: CompactionObserver | undefined;
  readonly #flights = new SingleFlight<Epoch | null>();
  readonly #summaryCalls: Semaphore;
  readonly #failures = new Map<string, number>();

  constructor(options: CompactorOptions) {
    const { config, now = Date.now } = options;
    this.#config = config;
    const compaction = config.compaction;
    this.#settings = {
      threshold: compaction.threshold,
      target: compaction.target,
      keepRecent: compaction.keep_recent,
      maxMessages: compaction.max_messages,
      summaryMaxTokens: compaction.summary.max_tokens,
      pruneMaxResultChars: compaction.prune.max_result_chars,
    };
    this.#now = now;
    this.#store = options.store ?? new MemoryEpochStore({ maxEntries: config.cache.max_entries, ttlMs: config.cache.ttl_s * 1000, now });
    this.#counter = new ExactCounter(options.upstream, now);
    this.#chat = options.chat;
    this.#logger = options.logger;
    this.#summaryPrompt = options.summaryPrompt;
    this.#observer = options.observer;
    this.#summaryCalls = new Semaphore(compaction.summary.concurrency);
    this.windows = new ContextWindows({
      configured: (model) => this.#modelConfig(model).context_window,
      upstream: options.upstream,
      now,
      onUnknown: (model) =>
        this.#logger?.warn({ model }, 'the context window of this model is unknown: only compaction.max_messages can trigger a compaction'),
    });
  }

  /** Summary computations running now (for metrics and tests). */
  get runningSummaries(): number {
    return this.#flights.size;
  }

  get epochCount(): number {
    return this.#store.size;
  }

  /** Conversations whose summary failed less than a minute ago (they are not tried again until then). */
  get failingConversations(): number {
    return this.#failures.size;
  }

  /** Whether this conversation's summary failed less than {@link FAILURE_BACKOFF_MS} ago. */
  #inBackoff(conversation: string): boolean {
    const lastFailure = this.#failures.get(conversation);
    return lastFailure !== undefined && this.#now() - lastFailure < FAILURE_BACKOFF_MS;
  }

  /**
   * Remembers that a conversation's summary failed. Older failures are
   * forgotten as they expire: every conversation that ever failed stayed in the
   * map before, so a summarizer down for a day grew it with every conversation.
   */
  #noteFailure(conversation: string): void {
    const now = this.#now();
    for (const [key, at] of this.#failures) if (now - at >= FAILURE_BACKOFF_MS) this.#failures.delete(key);
    this.#failures.set(conversation, now);
  }

  /** Takes the upstream's real prompt size for a forwarded request. */
  learn(model: string, promptTokens: number, estimate: number): void {
    this.ratios.learn(model, promptTokens, estimate);
  }

  #modelConfig(model: string): ModelConfig {
    const models = this.#config.models;
    return (Object.hasOwn(models, model) ? models[model] : undefined) ?? models['*'] ?? { context_window: 'auto', reserve_output_tokens: 1024 };
  }

  async #budgetOf(model: string, body: Readonly<Record<string, unknown>>, headers: CallHeaders | undefined): Promise<Budget> {
    const window = await this.windows.get(model, headers);
    const reserve = Math.max(numberField(body['max_tokens']), numberField(body['max_completion_tokens']), this.#modelConfig(model).reserve_output_tokens);
    return { model, window, reserve, budget: window === null ? null : Math.max(0, window - reserve) };
  }

  /**
   * What to forward for one chat request: the history as it came, or with an
   * epoch applied, or compacted now (which makes a new epoch).
   *
   * Throws {@link ContextLengthExceededError} when even the last turn cannot
   * fit, and {@link SummaryFailedError} when a summary fails and
   * `on_summary_failure` is `error`.
   */
  async prepare(input: PrepareInput): Promise<Prepared> {
    const { body } = input;
    const model = typeof body['model'] === 'string' ? body['model'] : '';
    const toolsEstimate = estimateToolsTokens(body['tools']);
    const forwardAs = (messages: ChatMessage[], report: string | null, afterResponse?: () => void): Prepared => ({
      messages,
      changed: messages !== input.messages,
      report,
      estimate: rawEstimate(messages, toolsEstimate),
      ...(afterResponse === undefined ? {} : { afterResponse }),
    });
    if (!this.#config.compaction.enabled) return forwardAs(input.messages, null);

    const limits = await this.#budgetOf(model, body, input.upstreamHeaders);
    const ratio = this.ratios.get(model);
    const messages = this.#pruneOversizedResults(input.messages, limits.budget);
    const originalSize = rawEstimate(messages, toolsEstimate) * ratio;

    // Fast path: well under the soft threshold nothing is hashed or looked up.
    const { soft_threshold: softThreshold, max_messages: maxMessages } = this.#config.compaction;
    const underSoft = limits.budget === null || originalSize < softThreshold * limits.budget;
    if (underSoft && (maxMessages === 0 || messages.length < maxMessages)) {
      return forwardAs(messages, messages === input.messages ? null : this.#prunedReport(input.messages, messages, toolsEstimate, ratio));
    }

    // Hashed before pruning: the prefix names what the client sent, whatever the budget of this request.
    await yieldOnLongHistory(messages.length);
    const hashes = prefixHashes({ tenant: input.tenant, model }, input.messages);
    await yieldOnLongHistory(messages.length);
    const sizeOf = (message: ChatMessage): number => estimateMessageTokens(message) * ratio;
    const job: Job = { hashes, messages, body, model, limits, ratio, toolsEstimate, originalSize, headers: input.upstreamHeaders };
    for (let attempt = 0; ; attempt++) {
      const candidate = candidateOf(messages, this.#longestEpoch(hashes, false));
      if (attempt === 0) this.#observer?.epochLookup(candidate.epoch !== null);
      let sizes: Sizes = { perMessage: candidate.messages.map(sizeOf), fixed: toolsEstimate * ratio };
      let size = totalSize(sizes);
      if (limits.budget !== null && isNear(size, this.#settings.threshold * limits.budget)) {
        sizes = await this.#measured(job, candidate.messages, sizes, input.signal);
        size = totalSize(sizes);
      }
      const reused = candidate.epoch === null ? null : reusedLine({ before: originalSize, after: size });

      const trigger = triggerOf(size, candidate.messages.length, limits.budget, this.#settings);
      if (trigger === null) {
        // Between the soft threshold and the threshold: forward as is, and once the answer
        // has been streamed, prepare the next epoch in the background.
        const background =
          limits.budget !== null && size >= softThreshold * limits.budget ? () => this.#startBackground({ ...job, candidate, sizes }) : undefined;
        return forwardAs(candidate.epoch === null ? messages : [...candidate.messages], reused, background);
      }

      // Crossed: an epoch prepared in the background applies now, with no waiting.
      const pending = this.#pendingBeyond(hashes, candidate.sourceStart);
      if (pending !== null) {
        this.#store.set({ ...pending, pending: false });
        continue;
      }
      // Another request of this conversation is compacting it: wait for that epoch, then plan again.
      const running = this.#runningFor(hashes);
      if (running !== undefined && attempt < MAX_WAITS) {
        input.onProgress?.(`compacting (waiting for the summary already running)`);
        await this.#flights.wait(running, input.signal).catch((error: unknown) => {
          if (input.signal.aborted) throw error;
        });
        continue;
      }

      const plan = this.#plan(candidate, sizes, limits, trigger, sizeOf);
      switch (plan.tier) {
        case 'nothing':
          if (limits.budget !== null && size > limits.budget) throw this.#tooLarge(size, limits, originalSize);
          return forwardAs(candidate.epoch === null ? messages : [...candidate.messages], reused);
        case 'too-large':
          throw this.#tooLarge(plan.needed, limits, originalSize, summaryPairTokens(this.#settings.summaryMaxTokens));
        case 'prune': {
          const { candidateEnd, sourceLength } = epochBoundary(candidate, plan.cut);
          const report = prunedLine({ results: plan.pruned, before: originalSize, after: plan.size });
          const epoch: Epoch = {
            key: hashes[sourceLength]!,
            sourceLength,
            replacement: plan.messages.slice(0, candidateEnd),
            summary: candidate.epoch?.summary ?? null,
            strategy: 'pruned',
            report,
          };
          this.#store.set(epoch);
          this.#logger?.info({ model, tier: 'prune' }, report);
          this.#observer?.compaction({ model, tier: 'prune', outcome: 'compacted', tokensBefore: originalSize, tokensAfter: plan.size, pending: false });
          return this.#forward(epoch, messages, input, limits, job);
        }
        case 'summary':
        case 'steps': {
          const compaction = { ...job, candidate, plan };
          const epoch = await this.#flights.run(
            this.#epochKey(compaction),
            (signal) => this.#summarizeEpoch(compaction, signal, input.onProgress),
            input.signal,
          );
          // Counted where the summary was tried, once, not by each request that waited for it.
          if (epoch === null) return forwardAs([...candidate.messages], null);
          return this.#forward(epoch, messages, input, limits, job);
        }
      }
    }
  }

  /** The 400 for a history that cannot fit even compacted, counted. */
  #tooLarge(needed: number, limits: Budget, originalSize: number, summaryTokens = 0): ContextLengthExceededError {
    this.#observer?.compaction({ model: limits.model, tier: 'none', outcome: 'too_large', tokensBefore: originalSize, tokensAfter: needed + summaryTokens, pending: false });
    return new ContextLengthExceededError(needed, limits.window ?? 0, limits.reserve, summaryTokens);
  }

  /** Tiers 1 and 2, then tier 3 when one long turn is the problem and its steps do better. */
  #plan(
    candidate: Candidate,
    sizes: Sizes,
    limits: Budget,
    trigger: Trigger,
    sizeOf: (message: ChatMessage) => number,
    settings: CompactionSettings = this.#settings,
  ): CompactionPlan | StepsPlan {
    const plan = planCompaction(candidate, sizes, limits.budget, trigger, settings, sizeOf);
    const target = limits.budget === null ? Number.POSITIVE_INFINITY : settings.target * limits.budget;
    const needsSteps = plan.tier === 'nothing' || plan.tier === 'too-large' || (plan.tier === 'summary' && plan.size > target);
    if (!needsSteps || (plan.tier === 'nothing' && trigger === 'count')) return plan;
    const steps = planSteps(candidate, sizes, limits.budget, settings);
    if (steps === null) return plan;
    if (plan.tier === 'summary' && steps.size >= plan.size) return plan;
    if (limits.budget !== null && steps.size > limits.budget) {
      return plan.tier === 'summary' ? plan : { tier: 'too-large', needed: steps.size - this.#settings.summaryMaxTokens };
    }
    return steps;
  }

  #epochKey(compaction: { hashes: readonly string[]; candidate: Candidate; plan: SummaryPlan }): string {
    return compaction.hashes[epochBoundary(compaction.candidate, coveredEnd(compaction.plan)).sourceLength]!;
  }

  /** Starts the next epoch in the background (single flight), unless one is already pending or running for this conversation. */
  #startBackground(job: Job & { candidate: Candidate; sizes: Sizes }): void {
    if (this.#pendingBeyond(job.hashes, job.candidate.sourceStart) !== null || this.#runningFor(job.hashes) !== undefined) return;
    // Within a failure's back-off there is nothing to try: each request of the conversation counted a failed compaction here.
    if (this.#inBackoff(conversationOf(job))) return;
    // The epoch applies only once the conversation has grown from here to the threshold, and that growth
    // stays raw too: keep that much less now, so what is kept raw then is about `keep_recent` again.
    const { threshold, soft_threshold: softThreshold } = this.#config.compaction;
    const settings = { ...this.#settings, keepRecent: Math.max(0, this.#settings.keepRecent - (threshold - softThreshold)) };
    const plan = this.#plan(job.candidate, job.sizes, job.limits, 'size', (message) => estimateMessageTokens(message) * job.ratio, settings);
    // Pruning costs no model call: it is done when it is needed, not ahead.
    if (plan.tier !== 'summary' && plan.tier !== 'steps') return;
    const compaction = { ...job, plan, pending: true };
    this.#flights.run(this.#epochKey(compaction), (signal) => this.#summarizeEpoch(compaction, signal, undefined)).catch((error: unknown) => {
      this.#logger?.warn({ model: job.model, reason: error instanceof Error ? error.message : String(error) }, 'background summary failed');
    });
  }

  /** Forwards `epoch` applied to the history, after checking that it leaves room for the answer. */
  async #forward(epoch: Epoch, messages: ChatMessage[], input: PrepareInput, limits: Budget, job: Job): Promise<Prepared> {
    const forwarded = [...epoch.replacement, ...messages.slice(epoch.sourceLength)];
    const estimate = rawEstimate(forwarded, job.toolsEstimate);
    if (limits.budget !== null) {
      let size = estimate * this.ratios.get(job.model);
      if (isNear(size, limits.budget)) {
        const exact = await this.#counter.count({ ...job.body, messages: forwarded }, input.signal, job.headers);
        if (exact !== null) {
          this.ratios.learn(job.model, exact, estimate);
          size = exact;
        }
      }
      if (size > limits.budget) throw this.#tooLarge(size, limits, job.originalSize);
    }
    return { messages: forwarded, changed: true, report: epoch.report, estimate };
  }

  /** Sizes scaled to the upstream's exact count of the candidate, when it gives one. */
  async #measured(job: Job, messages: readonly ChatMessage[], sizes: Sizes, signal: AbortSignal): Promise<Sizes> {
    const exact = await this.#counter.count({ ...job.body, messages }, signal, job.headers);
    if (exact === null) return sizes;
    this.ratios.learn(job.model, exact, rawEstimate(messages, job.toolsEstimate));
    const scale = exact / Math.max(1, totalSize(sizes));
    return { perMessage: sizes.perMessage.map((size) => size * scale), fixed: sizes.fixed * scale };
  }

  /**
   * A tool result larger than a quarter of the budget is pruned to that size in
   * every request: it could never be sent whole. The limit is in characters of
   * the bytes/4 estimate (a quarter of the budget in tokens is about as many
   * characters as the budget has tokens), never of the learned ratio, so the
   * same history is pruned the same way from one request to the next.
   */
  #pruneOversizedResults(messages: ChatMessage[], budget: number | null): ChatMessage[] {
    if (budget === null) return messages;
    return pruneToolResults(messages, Math.max(MIN_OVERSIZED_RESULT_CHARS, Math.floor(budget)));
  }

  #prunedReport(before: ChatMessage[], after: ChatMessage[], toolsEstimate: number, ratio: number): string {
    let results = 0;
    for (let index = 0; index < before.length; index++) if (before[index] !== after[index]) results++;
    return prunedLine({ results, before: rawEstimate(before, toolsEstimate) * ratio, after: rawEstimate(after, toolsEstimate) * ratio });
  }

  #runningFor(hashes: readonly string[]): string | undefined {
    if (this.#flights.size === 0) return undefined;
    for (let index = hashes.length - 1; index >= 0; index--) if (this.#flights.has(hashes[index]!)) return hashes[index];
    return undefined;
  }

  /**
   * The longest pending epoch that covers more of this history than the epoch
   * in use (which starts the candidate at `sourceStart`). A pending epoch that
   * covers no more is stale (a later compaction overtook it): it is dropped, so
   * it cannot stand in the way of the next background epoch.
   */
  #pendingBeyond(hashes: readonly string[], sourceStart: number): Epoch | null {
    const pending = this.#longestEpoch(hashes, true);
    if (pending === null || pending.sourceLength > sourceStart) return pending;
    this.#store.delete(pending.key);
    return this.#pendingBeyond(hashes, sourceStart);
  }

  /** The epoch of the longest prefix of this history, in use or pending. */
  #longestEpoch(hashes: readonly string[], pending: boolean): Epoch | null {
    if (this.#store.size === 0) return null;
    for (let index = hashes.length - 1; index > 0; index--) {
      const epoch = this.#store.get(hashes[index]!);
      if (epoch !== undefined && epoch.sourceLength === index && (epoch.pending === true) === pending) return epoch;
    }
    return null;
  }

  /**
   * Writes the notes for a summary or steps plan and stores the epoch they make
   * (pending when computed in the background). On failure it falls back as
   * `on_summary_failure` says: a truncation epoch, null (forward as is), or an error.
   */
  async #summarizeEpoch(
    job: Job & { candidate: Candidate; plan: SummaryPlan; pending?: boolean },
    signal: AbortSignal,
    onProgress: ((line: string) => void) | undefined,
  ): Promise<Epoch | null> {
    const { candidate, plan, toolsEstimate } = job;
    // The ratio as learned now: an exact count taken while planning this request may have corrected it.
    const ratio = this.ratios.get(job.model);
    const head = headLength(candidate.messages);
    const covered = coveredEnd(plan);
    const { candidateEnd, sourceLength } = epochBoundary(candidate, covered);
    const key = job.hashes[sourceLength]!;
    const conversation = conversationOf(job);
    const started = this.#now();
    const summaryConfig = this.#config.compaction.summary;
    const sizeOfMessages = (messages: readonly ChatMessage[], withTools: boolean): number =>
      (rawEstimate(messages, 0) + (withTools ? toolsEstimate : 0)) * ratio;
    const rest = candidate.messages.slice(candidateEnd);
    const replacementWith = (notes: string, strategy: 'summary' | 'truncated'): ChatMessage[] => {
      const kept = candidate.messages.slice(covered, candidateEnd);
      const headMessages = candidate.messages.slice(0, head);
      if (plan.tier === 'summary') {
        const pair = strategy === 'summary' ? summaryPair(notes) : truncationNotice(notes);
        return [...headMessages, ...pair, ...kept];
      }
      const marked = mark(strategy === 'summary' ? 'steps' : 'truncated', notes);
      return [...headMessages, candidate.messages[plan.anchor]!, withNotes(candidate.messages[plan.cut]!, marked), ...kept];
    };
    const oldCount = plan.cut - head - (plan.tier === 'steps' ? 1 : 0);
    const keptCount = candidate.messages.length - plan.cut;
    const store = (epoch: Epoch): Epoch => {
      this.#store.set(job.pending === true ? { ...epoch, pending: true } : epoch);
      return epoch;
    };

    onProgress?.(`compacting ${oldCount} messages`);
    await yieldOnLongHistory(candidate.messages.length);
    let failure: string;
    let timedOut = false;
    // A request within a failure's back-off tries no summary: it is no compaction of its own, unless it makes a truncation.
    const tried = !this.#inBackoff(conversation);
    if (!tried) {
      failure = 'the summary failed less than a minute ago';
    } else {
      const timeout = AbortSignal.timeout(summaryConfig.timeout_ms);
      try {
        const result = await this.#summaryCalls.use(() =>
          summarize(
            {
              body: job.body,
              candidate: candidate.messages,
              head,
              cut: plan.cut,
              earlierNotes: candidate.epoch?.summary ?? null,
              window: job.limits.window,
              sizeOfMessages,
              model: summaryConfig.model ?? job.model,
              maxTokens: summaryConfig.max_tokens,
              ...(this.#summaryPrompt === undefined ? {} : { systemPrompt: this.#summaryPrompt }),
              signal: AbortSignal.any([signal, timeout]),
              onProgress: (progress: SummaryProgress) => onProgress?.(progressLine(progress)),
            },
            (body, callSignal) => this.#chat(body, callSignal, job.headers),
          ),
        );
        this.#failures.delete(conversation);
        const replacement = replacementWith(result.notes, 'summary');
        const after = sizeOfMessages([...replacement, ...rest], true);
        const report = summarizedLine({ old: oldCount, kept: keptCount, before: job.originalSize, after, milliseconds: this.#now() - started });
        this.#logger?.info({ model: job.model, tier: plan.tier, mode: result.mode, calls: result.calls, pending: job.pending === true }, report);
        this.#observer?.summary({ milliseconds: this.#now() - started, outcome: 'ok', calls: result.calls });
        this.#observer?.compaction({ model: job.model, tier: plan.tier, outcome: job.pending === true ? 'prepared' : 'compacted', tokensBefore: job.originalSize, tokensAfter: after, pending: job.pending === true });
        return store({ key, sourceLength, replacement, summary: result.notes, strategy: plan.tier, report });
      } catch (error) {
        if (signal.aborted && !timeout.aborted) throw error;
        timedOut = timeout.aborted;
        failure = timedOut ? `the summary timed out after ${summaryConfig.timeout_ms} ms` : error instanceof SummaryError ? error.message : String(error);
        this.#noteFailure(conversation);
        this.#logger?.warn({ model: job.model, reason: failure }, 'summary failed');
        this.#observer?.summary({ milliseconds: this.#now() - started, outcome: timedOut ? 'timeout' : 'failed', calls: error instanceof SummaryError ? error.calls : 1 });
      }
    }

    // A background epoch that failed leaves nothing behind: the request that crosses the threshold decides.
    const counted = (outcome: 'failed' | 'forwarded'): void => {
      if (tried) this.#observer?.compaction({ model: job.model, tier: plan.tier, outcome, tokensBefore: job.originalSize, tokensAfter: job.originalSize, pending: job.pending === true });
    };
    if (job.pending === true) {
      counted('failed');
      return null;
    }
    switch (this.#config.compaction.on_summary_failure) {
      case 'forward':
        counted('forwarded');
        return null;
      case 'error':
        counted('failed');
        throw new SummaryFailedError(failure, timedOut);
      case 'truncate': {
        const earlierNotes = candidate.epoch?.summary ?? null;
        const replacement = replacementWith(truncationText(oldCount, plan.tier, earlierNotes), 'truncated');
        const after = sizeOfMessages([...replacement, ...rest], true);
        const report = truncatedLine({ dropped: oldCount, kept: keptCount, before: job.originalSize, after, reason: failure });
        this.#logger?.info({ model: job.model, tier: 'truncate' }, report);
        this.#observer?.compaction({ model: job.model, tier: plan.tier, outcome: 'truncated', tokensBefore: job.originalSize, tokensAfter: after, pending: false });
        return store({ key, sourceLength, replacement, summary: earlierNotes, strategy: 'truncated', report, expiresAt: this.#now() + TRUNCATION_TTL_MS });
      }
    }
  }
}

type SummaryPlan = Extract<CompactionPlan, { tier: 'summary' }> | StepsPlan;

/** What a compaction needs to know of its request. */
interface Job {
  readonly hashes: readonly string[];
  readonly messages: ChatMessage[];
  readonly body: Readonly<Record<string, unknown>>;
  readonly model: string;
  readonly limits: Budget;
  readonly ratio: number;
  readonly toolsEstimate: number;
  readonly originalSize: number;
  readonly headers: CallHeaders | undefined;
}

/** Names a conversation by its prefix up to the first turn after the head: what a summary failure's back-off is kept by. */
function conversationOf(job: Pick<Job, 'hashes' | 'messages'>): string {
  return job.hashes[Math.min(headLength(job.messages) + 1, job.messages.length)]!;
}

/** Where the part a plan rewrites ends: the cut, or one past it for steps (the first kept message carries the notes). */
function coveredEnd(plan: SummaryPlan): number {
  return plan.tier === 'steps' ? plan.cut + 1 : plan.cut;
}

/** The bytes/4 estimate of messages plus tools, before any ratio. */
function rawEstimate(messages: readonly ChatMessage[], toolsEstimate: number): number {
  let total = toolsEstimate;
  for (const message of messages) total += estimateMessageTokens(message);
  return total;
}

function isNear(size: number, threshold: number): boolean {
  return Math.abs(size - threshold) <= EXACT_COUNT_BAND * threshold;
}

function progressLine(progress: SummaryProgress): string {
  const chunk = progress.chunks > 1 ? ` (chunk ${progress.chunk}/${progress.chunks})` : '';
  return `compacting ${progress.messages} messages${chunk}`;
}
