import type { Config, ModelConfig } from '../config/schema.js';
import type { ChatMessage } from '../transcript/message.js';
import { headLength } from '../transcript/groups.js';
import { mark } from '../transcript/marks.js';
import { pruneToolResults } from '../transcript/prune.js';
import { estimateMessageTokens, estimateToolsTokens } from '../transcript/tokens.js';
import { ContextWindows } from './context-window.js';
import { type Epoch, type EpochStore, MemoryEpochStore } from './epoch-store.js';
import { ExactCounter } from './exact-count.js';
import {
  type Candidate,
  type CompactionSettings,
  type Sizes,
  candidateOf,
  epochBoundary,
  planCompaction,
  totalSize,
  triggerOf,
} from './plan.js';
import { prefixHashes } from './prefix-hash.js';
import { prunedLine, reusedLine, summarizedLine, truncatedLine } from './report.js';
import { Semaphore } from './semaphore.js';
import { SingleFlight } from './single-flight.js';
import { type ChatCall, type SummaryProgress, SummaryError, summarize } from './summarize.js';
import { TokenRatios } from './token-ratio.js';
import type { UpstreamJson } from './upstream-json.js';

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

/** How many times a request waits for a running compaction of its conversation and plans again before planning regardless. */
const MAX_WAITS = 3;

export const SUMMARY_ACKNOWLEDGEMENT = 'Understood; continuing from these notes.';

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
}

export interface Prepared {
  /** What to forward: the input array itself when nothing changed. */
  readonly messages: ChatMessage[];
  readonly changed: boolean;
  /** The compaction line for logs and the `x-compactor` header, or null. */
  readonly report: string | null;
  /** The bytes/4 estimate of the forwarded prompt, before any ratio: what the upstream's count is learned against. */
  readonly estimate: number;
}

export class ContextLengthExceededError extends Error {
  readonly status = 400;
  readonly type = 'invalid_request_error';
  readonly code = 'context_length_exceeded';
  readonly param = 'messages';

  constructor(
    readonly neededTokens: number,
    readonly window: number,
    readonly reservedTokens: number,
  ) {
    super(
      `This conversation needs about ${Math.ceil(neededTokens)} tokens for its prompt plus ${reservedTokens} reserved for the answer, ` +
        `but the model's context window is ${window} tokens; even compacted, its last turn does not fit.`,
    );
    this.name = 'ContextLengthExceededError';
  }
}

export class SummaryFailedError extends Error {
  readonly type = 'upstream_error';
  readonly param = null;

  constructor(
    message: string,
    readonly status: 502 | 504,
    readonly code: 'summary_failed' | 'summary_timeout',
  ) {
    super(message);
    this.name = 'SummaryFailedError';
  }
}

interface Budget {
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

  /** Takes the upstream's real prompt size for a forwarded request. */
  learn(model: string, promptTokens: number, estimate: number): void {
    this.ratios.learn(model, promptTokens, estimate);
  }

  #modelConfig(model: string): ModelConfig {
    const models = this.#config.models;
    return (Object.hasOwn(models, model) ? models[model] : undefined) ?? models['*'] ?? { context_window: 'auto', reserve_output_tokens: 1024 };
  }

  async #budgetOf(model: string, body: Readonly<Record<string, unknown>>): Promise<Budget> {
    const window = await this.windows.get(model);
    const reserve = Math.max(numberField(body['max_tokens']), numberField(body['max_completion_tokens']), this.#modelConfig(model).reserve_output_tokens);
    return { window, reserve, budget: window === null ? null : Math.max(0, window - reserve) };
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
    const unchanged = (messages: ChatMessage[], report: string | null = null): Prepared => ({
      messages,
      changed: messages !== input.messages,
      report,
      estimate: rawEstimate(messages, toolsEstimate),
    });
    if (!this.#config.compaction.enabled) return unchanged(input.messages);

    const limits = await this.#budgetOf(model, body);
    const ratio = this.ratios.get(model);
    const messages = this.#pruneOversizedResults(input.messages, limits.budget);
    const originalSize = rawEstimate(messages, toolsEstimate) * ratio;

    // Fast path: well under the soft threshold nothing is hashed or looked up.
    const { soft_threshold: softThreshold, max_messages: maxMessages } = this.#config.compaction;
    const underSoft = limits.budget === null || originalSize < softThreshold * limits.budget;
    if (underSoft && (maxMessages === 0 || messages.length < maxMessages)) {
      return unchanged(messages, messages === input.messages ? null : this.#prunedReport(input.messages, messages, toolsEstimate, ratio));
    }

    // Hashed before pruning: the prefix names what the client sent, whatever the budget of this request.
    const hashes = prefixHashes({ tenant: input.tenant, model }, input.messages);
    for (let wait = 0; wait < MAX_WAITS; wait++) {
      const running = this.#runningFor(hashes);
      if (running === undefined) break;
      // Another request of this conversation is compacting it: wait for that epoch, then plan again.
      await this.#flights.wait(running, input.signal).catch((error: unknown) => {
        if (input.signal.aborted) throw error;
      });
    }
    input.signal.throwIfAborted();

    const candidate = candidateOf(messages, this.#longestEpoch(hashes));
    const sizeOf = (message: ChatMessage): number => estimateMessageTokens(message) * ratio;
    let sizes: Sizes = { perMessage: candidate.messages.map(sizeOf), fixed: toolsEstimate * ratio };
    let size = totalSize(sizes);
    if (limits.budget !== null && isNear(size, this.#settings.threshold * limits.budget)) {
      sizes = await this.#measured(model, body, candidate.messages, sizes, toolsEstimate, input.signal);
      size = totalSize(sizes);
    }

    const trigger = triggerOf(size, candidate.messages.length, limits.budget, this.#settings);
    if (trigger === null) {
      const report = candidate.epoch === null ? null : reusedLine({ before: originalSize, after: size });
      return unchanged(candidate.messages === input.messages ? input.messages : [...candidate.messages], report);
    }

    const plan = planCompaction(candidate, sizes, limits.budget, trigger, this.#settings, sizeOf);
    switch (plan.tier) {
      case 'nothing':
        if (limits.budget !== null && size > limits.budget) throw new ContextLengthExceededError(size, limits.window ?? 0, limits.reserve);
        return unchanged([...candidate.messages], candidate.epoch === null ? null : reusedLine({ before: originalSize, after: size }));
      case 'too-large':
        throw new ContextLengthExceededError(plan.needed, limits.window ?? 0, limits.reserve);
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
        return this.#forward(epoch, messages, toolsEstimate, input, limits, model, body);
      }
      case 'summary': {
        const { sourceLength } = epochBoundary(candidate, plan.cut);
        const key = hashes[sourceLength]!;
        const conversation = hashes[Math.min(headLength(messages) + 1, messages.length)]!;
        const epoch = await this.#flights.run(
          key,
          (signal) => this.#summarizeEpoch({ key, conversation, candidate, cut: plan.cut, body, model, limits, ratio, toolsEstimate, originalSize, signal, onProgress: input.onProgress }),
          input.signal,
        );
        if (epoch === null) return unchanged([...candidate.messages], null);
        return this.#forward(epoch, messages, toolsEstimate, input, limits, model, body);
      }
    }
  }

  /** Forwards `epoch` applied to the history, after checking that it leaves room for the answer. */
  async #forward(
    epoch: Epoch,
    messages: ChatMessage[],
    toolsEstimate: number,
    input: PrepareInput,
    limits: Budget,
    model: string,
    body: Readonly<Record<string, unknown>>,
  ): Promise<Prepared> {
    const forwarded = [...epoch.replacement, ...messages.slice(epoch.sourceLength)];
    const estimate = rawEstimate(forwarded, toolsEstimate);
    if (limits.budget !== null) {
      let size = estimate * this.ratios.get(model);
      if (isNear(size, limits.budget)) {
        const exact = await this.#counter.count({ ...body, messages: forwarded }, input.signal);
        if (exact !== null) {
          this.ratios.learn(model, exact, estimate);
          size = exact;
        }
      }
      if (size > limits.budget) throw new ContextLengthExceededError(size, limits.window ?? 0, limits.reserve);
    }
    return { messages: forwarded, changed: true, report: epoch.report, estimate };
  }

  /** Sizes scaled to the upstream's exact count of the candidate, when it gives one. */
  async #measured(
    model: string,
    body: Readonly<Record<string, unknown>>,
    messages: readonly ChatMessage[],
    sizes: Sizes,
    toolsEstimate: number,
    signal: AbortSignal,
  ): Promise<Sizes> {
    const exact = await this.#counter.count({ ...body, messages }, signal);
    if (exact === null) return sizes;
    this.ratios.learn(model, exact, rawEstimate(messages, toolsEstimate));
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

  #longestEpoch(hashes: readonly string[]): Epoch | null {
    if (this.#store.size === 0) return null;
    for (let index = hashes.length - 1; index > 0; index--) {
      const epoch = this.#store.get(hashes[index]!);
      if (epoch !== undefined && epoch.sourceLength === index) return epoch;
    }
    return null;
  }

  async #summarizeEpoch(job: {
    key: string;
    conversation: string;
    candidate: Candidate;
    cut: number;
    body: Readonly<Record<string, unknown>>;
    model: string;
    limits: Budget;
    ratio: number;
    toolsEstimate: number;
    originalSize: number;
    signal: AbortSignal;
    onProgress: ((line: string) => void) | undefined;
  }): Promise<Epoch | null> {
    const { candidate, cut, ratio, toolsEstimate } = job;
    const head = headLength(candidate.messages);
    const { candidateEnd, sourceLength } = epochBoundary(candidate, cut);
    const kept = candidate.messages.slice(cut, candidateEnd);
    const started = this.#now();
    const summaryConfig = this.#config.compaction.summary;
    const sizeOfMessages = (messages: readonly ChatMessage[], withTools: boolean): number =>
      (rawEstimate(messages, 0) + (withTools ? toolsEstimate : 0)) * ratio;
    const afterSize = (replacement: readonly ChatMessage[]): number =>
      sizeOfMessages([...replacement, ...candidate.messages.slice(candidateEnd)], true);

    const lastFailure = this.#failures.get(job.conversation);
    let failure: string;
    let timedOut = false;
    if (lastFailure !== undefined && this.#now() - lastFailure < FAILURE_BACKOFF_MS) {
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
              cut,
              earlierNotes: candidate.epoch?.summary ?? null,
              window: job.limits.window,
              sizeOfMessages,
              model: summaryConfig.model ?? job.model,
              maxTokens: summaryConfig.max_tokens,
              ...(this.#summaryPrompt === undefined ? {} : { systemPrompt: this.#summaryPrompt }),
              signal: AbortSignal.any([job.signal, timeout]),
              onProgress: (progress: SummaryProgress) => job.onProgress?.(progressLine(progress)),
            },
            this.#chat,
          ),
        );
        this.#failures.delete(job.conversation);
        const replacement = [...candidate.messages.slice(0, head), ...summaryPair(result.notes), ...kept];
        const report = summarizedLine({
          old: cut - head,
          kept: candidate.messages.length - cut,
          before: job.originalSize,
          after: afterSize(replacement),
          milliseconds: this.#now() - started,
        });
        const epoch: Epoch = { key: job.key, sourceLength, replacement, summary: result.notes, strategy: 'summary', report };
        this.#store.set(epoch);
        this.#logger?.info({ model: job.model, tier: 'summary', mode: result.mode, calls: result.calls }, report);
        return epoch;
      } catch (error) {
        if (job.signal.aborted) throw error;
        timedOut = timeout.aborted;
        failure = timedOut ? `the summary timed out after ${summaryConfig.timeout_ms} ms` : error instanceof SummaryError ? error.message : String(error);
        this.#failures.set(job.conversation, this.#now());
        this.#logger?.warn({ model: job.model, reason: failure }, 'summary failed');
      }
    }

    switch (this.#config.compaction.on_summary_failure) {
      case 'forward':
        return null;
      case 'error':
        throw new SummaryFailedError(
          `compactor could not summarize this conversation to fit the context window: ${failure}`,
          timedOut ? 504 : 502,
          timedOut ? 'summary_timeout' : 'summary_failed',
        );
      case 'truncate': {
        const dropped = cut - head;
        const earlierNotes = candidate.epoch?.summary ?? null;
        const replacement = [...candidate.messages.slice(0, head), ...truncationNotice(dropped, earlierNotes), ...kept];
        const report = truncatedLine({
          dropped,
          kept: candidate.messages.length - cut,
          before: job.originalSize,
          after: afterSize(replacement),
          reason: failure,
        });
        const epoch: Epoch = {
          key: job.key,
          sourceLength,
          replacement,
          summary: earlierNotes,
          strategy: 'truncated',
          report,
          expiresAt: this.#now() + TRUNCATION_TTL_MS,
        };
        this.#store.set(epoch);
        this.#logger?.info({ model: job.model, tier: 'truncate' }, report);
        return epoch;
      }
    }
  }
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

/** What replaces old turns: a user message with the notes and the assistant's acknowledgement, keeping alternation. */
export function summaryPair(notes: string): ChatMessage[] {
  return [
    { role: 'user', content: mark('summary', notes) },
    { role: 'assistant', content: mark('summary', SUMMARY_ACKNOWLEDGEMENT) },
  ];
}

/** What stands where a summary would when it could not be written: how much was dropped, and any earlier notes. */
export function truncationNotice(dropped: number, earlierNotes: string | null): ChatMessage[] {
  const notes = earlierNotes === null ? '' : `\n\nNotes from before them:\n${earlierNotes}`;
  return [
    { role: 'user', content: mark('truncated', `${dropped} earlier messages were omitted here because they could not be summarized.${notes}`) },
    { role: 'assistant', content: mark('truncated', 'Understood; continuing without them.') },
  ];
}
