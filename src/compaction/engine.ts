import type { Config, ModelConfig } from '../config/schema.js';
import type { ChatMessage } from '../transcript/message.js';
import { estimateRequestTokens, estimateToolsTokens } from '../transcript/tokens.js';
import { ContextLengthExceededError } from '../errors.js';
import { FAILURE_BACKOFF_MS, SummaryBackoff } from './backoff.js';
import { type Budget, budgetOf } from './budget.js';
import type { RequestView } from '../transcript/request-view.js';
import { ContextWindows } from './context-window.js';
import { windowNotices } from './window-notices.js';
import { type CandidateSizes, type Decision, type DecisionSettings, decide, decideAhead, decisionSettingsOf, skipsLookup } from './decide.js';
import { type Epoch, type EpochStore, MemoryEpochStore } from './epochs/epoch-store.js';
import { prefixHashes } from './epochs/prefix-hash.js';
import { SingleFlight } from './epochs/single-flight.js';
import { derivesFromTruncation, epochBeneath } from './epochs/truncations.js';
import { EpochWriter, seenWhole, type CompactionLogger, type CompactionRequest, type SummaryDecision } from './epoch-writer.js';
import { ExactCounter } from './exact-count.js';
import type { CompactionObserver } from './observer.js';
import { type Candidate, candidateOf, totalSize } from './plan.js';
import { pruneOversizedResults, prunedReport } from './oversized.js';
import { prunedLine, reusedLine, wouldLine } from './report.js';
import { forcedSettings, observedDecision } from './observe.js';
import { prunedEpoch } from './replacement.js';
import { isNear, scaledTo, sizesOf } from './sizing.js';
import { yieldOnLongHistory } from './long-history.js';
import type { ChatCall } from './summary/summarize.js';
import { sharedRatioName, TokenRatios } from './token-ratio.js';
import type { CallHeaders, UpstreamJson } from './upstream-json.js';

export type { CompactionLogger } from './epoch-writer.js';

/**
 * How often a replica gives its new ratio measures to a shared store: off any
 * request, batched (one round trip for every tenant's model measured since),
 * and soon enough that a conversation moving to another replica finds them
 * (an agent's next request comes seconds later).
 */
const RATIO_SHARE_INTERVAL_MS = 2_000;

/**
 * The compaction engine: per chat request, gathers what {@link decide} needs
 * (the window, the learned ratio, prefix hashes, epochs, exact counts near a
 * threshold), and performs what it decides: forward, apply an epoch, wait for
 * a running summary, prune, summarize (through {@link EpochWriter}), refuse.
 *
 * It is stateless towards the client (which keeps sending its whole history)
 * and remembers, per conversation prefix, what it replaced that prefix with
 * (an epoch), so the same history is always rewritten the same way: one
 * summary per epoch, and a forwarded prompt whose beginning stays
 * byte-identical from request to request.
 *
 * Over 300 lines: the one class that sequences lookup, decision and effects;
 * its parts (decide, the writer, the epoch helpers, observe mode's words in
 * observe.ts) live in their own files.
 */

export interface CompactionEngineOptions {
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
  /** The request as the engine reads it, whatever its wire format: model, history (after pair handling), tools, the answer's limit. */
  readonly request: RequestView;
  /** Names the client's credential; epochs are never shared across tenants. */
  readonly tenant: string;
  /** Aborts when the client goes away. */
  readonly signal: AbortSignal;
  /** Told while the request waits for a summary (`compacting 84 messages (chunk 2/3)`). */
  readonly onProgress?: (line: string) => void;
  /** Headers for the upstream calls made for this request (the client's credential when no upstream key is set). */
  readonly upstreamHeaders?: CallHeaders | undefined;
  /**
   * compact (the default): rewrite what must be. observe: decide once and only
   * say what would be done (no wait, no summary, no epoch written). force
   * (`POST /v1/compact` with `"force": true`): compact whenever there is
   * something old to summarize.
   */
  readonly mode?: 'compact' | 'observe' | 'force';
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
  /** Whether an epoch was written for this request (new), one already written was applied (reused), or neither (none). */
  readonly epoch: 'new' | 'reused' | 'none';
}

export class CompactionEngine {
  readonly windows: ContextWindows;
  readonly ratios: TokenRatios;
  /** Conversations whose summary failed within the last minute. */
  readonly backoff: SummaryBackoff;
  readonly #config: Config;
  readonly #settings: DecisionSettings;
  readonly #store: EpochStore;
  readonly #counter: ExactCounter;
  readonly #logger: CompactionLogger | undefined;
  readonly #observer: CompactionObserver | undefined;
  readonly #flights = new SingleFlight<Epoch | null>();
  readonly #writer: EpochWriter;
  readonly #now: () => number;
  /** The next share of ratio measures with the store, while one is due. */
  #ratioShare: NodeJS.Timeout | undefined;

  constructor(options: CompactionEngineOptions) {
    const { config, now = Date.now } = options;
    this.#config = config;
    this.#now = now;
    const compaction = config.compaction;
    this.#settings = decisionSettingsOf(compaction);
    this.#store = options.store ?? new MemoryEpochStore({ maxEntries: config.cache.max_entries, ttlMs: config.cache.ttl_s * 1000, now });
    this.#counter = new ExactCounter(options.upstream, now);
    this.#logger = options.logger;
    this.#observer = options.observer;
    const store = this.#store;
    this.ratios = new TokenRatios({ shared: store.shareRatios !== undefined });
    // A failure is told to a shared store at once, so no replica retries that conversation's summary within the minute.
    this.backoff = new SummaryBackoff(now, store.noteFailure === undefined ? undefined : (conversation) => void store.noteFailure?.(conversation, FAILURE_BACKOFF_MS));
    this.#writer = new EpochWriter({
      config: compaction,
      chat: options.chat,
      store: this.#store,
      ratios: this.ratios,
      backoff: this.backoff,
      now,
      logger: options.logger,
      observer: options.observer,
      summaryPrompt: options.summaryPrompt,
    });
    this.windows = new ContextWindows({
      configured: (model) => this.#modelConfig(model).context_window,
      upstream: options.upstream,
      now,
      ...windowNotices(options.logger),
    });
  }

  /** Summary computations running now (for metrics and tests). */
  get runningSummaries(): number {
    return this.#flights.size;
  }

  get epochCount(): number {
    return this.#store.size;
  }

  /** Takes the upstream's real prompt size for a tenant's forwarded request. */
  learn(model: string, tenant: string, promptTokens: number, estimate: number): void {
    this.ratios.learn(model, tenant, promptTokens, estimate);
    if (this.#store.shareRatios === undefined || !this.ratios.hasUnshared || this.#ratioShare !== undefined) return;
    this.#ratioShare = setTimeout(() => void this.shareRatios(), RATIO_SHARE_INTERVAL_MS);
    // A pending share never keeps the process alive; measures not shared at exit are this replica's only.
    this.#ratioShare.unref();
  }

  /** Gives the ratio measures taken since the last share to a shared store now (the timer's work; tests call it). */
  async shareRatios(): Promise<void> {
    clearTimeout(this.#ratioShare);
    this.#ratioShare = undefined;
    if (this.#store.shareRatios === undefined || !this.ratios.hasUnshared) return;
    await this.#store.shareRatios(this.ratios.takeUnshared());
  }

  #modelConfig(model: string): ModelConfig {
    const models = this.#config.models;
    return (Object.hasOwn(models, model) ? models[model] : undefined) ?? models['*'] ?? { context_window: 'auto', reserve_output_tokens: 1024 };
  }

  /**
   * What to forward for one chat request: the history as it came, or with an
   * epoch applied, or compacted now (which makes a new epoch).
   *
   * Throws {@link ContextLengthExceededError} when even the last turn cannot
   * fit, and `SummaryFailedError` when a summary fails and
   * `on_summary_failure` is `error`.
   */
  async prepare(input: PrepareInput): Promise<Prepared> {
    const { model, chatBody: body } = input.request;
    // Stringified once: an agent's tool definitions run to tens of kilobytes.
    const toolsEstimate = estimateToolsTokens(input.request.tools);
    const estimateOf = (messages: readonly ChatMessage[]): number => estimateRequestTokens({ messages }) + toolsEstimate;
    const forwardAs: ForwardAs = (messages, { report, estimate = estimateOf(messages), afterResponse, epoch = 'none' }) => ({
      messages,
      changed: messages !== input.request.messages,
      report,
      estimate,
      epoch,
      ...(afterResponse === undefined ? {} : { afterResponse }),
    });
    const mode = input.mode ?? 'compact';
    if (!this.#config.compaction.enabled) return forwardAs(input.request.messages, { report: null });

    const window = await this.windows.get(model, input.upstreamHeaders);
    const budget = budgetOf(window, input.request.maxOutputTokens, this.#modelConfig(model).reserve_output_tokens, this.#config.compaction.summary.max_tokens);
    const ratio = this.ratios.get(model, input.tenant);
    const messages = pruneOversizedResults(input.request.messages, budget.tokens);
    const estimate = estimateOf(messages);
    const originalSize = estimate * ratio;

    // Fast path: well under the soft threshold nothing is hashed or looked up.
    if (mode !== 'force' && skipsLookup(originalSize, messages.length, budget, this.#settings)) {
      if (mode === 'observe') {
        const line = messages === input.request.messages ? null : wouldLine(prunedReport(input.request.messages, messages, estimateOf, ratio));
        return forwardAs(input.request.messages, { report: line, estimate: estimateOf(input.request.messages) });
      }
      return forwardAs(messages, { report: messages === input.request.messages ? null : prunedReport(input.request.messages, messages, estimateOf, ratio), estimate });
    }

    // Hashed before pruning: the prefix names what the client sent, whatever the budget of this request.
    await yieldOnLongHistory(messages.length);
    const hashes = prefixHashes({ tenant: input.tenant, model }, input.request.messages);
    await yieldOnLongHistory(messages.length);
    const request: CompactionRequest = { hashes, tenant: input.tenant, messages, body, model, budget, toolsEstimate, originalSize, headers: input.upstreamHeaders };
    if (mode === 'observe') return this.#observe(input, request, forwardAs);
    const waits = { milliseconds: 0, count: 0 };
    try {
      return await this.#decideAndApply(input, request, forwardAs, waits);
    } finally {
      if (waits.count > 0) this.#observer?.summaryWait?.(waits.milliseconds);
    }
  }

  /** The loop of {@link prepare} past the fast path: look up, decide, perform, until something can be forwarded. */
  async #decideAndApply(
    input: PrepareInput,
    request: CompactionRequest,
    forwardAs: ForwardAs,
    waits: { milliseconds: number; count: number },
  ): Promise<Prepared> {
    const settings = input.mode === 'force' ? forcedSettings(this.#settings) : this.#settings;
    const { hashes, messages, model, budget, toolsEstimate, originalSize } = request;
    let ratio = this.ratios.get(model, request.tenant);
    const waited = async <T>(work: Promise<T>): Promise<T> => {
      const started = this.#now();
      waits.count++;
      try {
        return await work;
      } finally {
        waits.milliseconds += this.#now() - started;
      }
    };
    for (let attempt = 0; ; attempt++) {
      // The first lookup also reads what other replicas learned (the same round trip): the ratio, a summary's back-off.
      const shared = attempt === 0 ? { ratio: sharedRatioName(model, request.tenant), conversation: this.#writer.conversationOf(request) } : undefined;
      const { inUse, pending, shared: state } = await this.#store.lookup(hashes, shared);
      if (state !== undefined && shared !== undefined) {
        if (state.ratio !== undefined) this.ratios.adopt(model, request.tenant, state.ratio);
        this.backoff.adopt(shared.conversation, state.backoffMs);
        ratio = this.ratios.get(model, request.tenant);
      }
      let candidate = candidateOf(messages, inUse);
      if (attempt === 0) this.#observer?.epochLookup(candidate.epoch !== null);
      let sizes: CandidateSizes = { ...sizesOf(candidate.messages, toolsEstimate, ratio), ratio };
      if (budget.tokens !== null && isNear(totalSize(sizes), settings.threshold * budget.tokens)) {
        sizes = await this.#measured(request, candidate.messages, sizes, input.signal);
      }
      const running = this.#runningFor(hashes);
      let decision = decide(candidate, sizes, budget, { pending, running: running !== undefined, attempt }, settings);
      // A compaction on top of a truncation is planned again from the original messages it dropped, once they may be summarized.
      if (compacts(decision) && this.#repairs(request, candidate)) {
        const beneath = await this.#beneath(request, candidate);
        const redo = decide(beneath.candidate, beneath.sizes, budget, { pending: null, running: false, attempt }, settings);
        if (compacts(redo)) [candidate, decision] = [beneath.candidate, redo];
      }
      switch (decision.kind) {
        case 'forward': {
          const reused = candidate.epoch === null ? null : reusedLine({ before: originalSize, after: decision.size });
          // Between the soft threshold and the threshold: once the answer has been streamed, prepare the next epoch.
          const background = decision.prepareNext ? () => this.#startBackground(request, candidate, sizes, pending) : undefined;
          return forwardAs(candidate.epoch === null ? messages : [...candidate.messages], { report: reused, afterResponse: background, epoch: candidate.epoch === null ? 'none' : 'reused' });
        }
        case 'apply-pending':
          await this.#store.save({ ...decision.epoch, pending: false });
          continue;
        case 'wait':
          input.onProgress?.(`compacting (waiting for the summary already running)`);
          // A background summary still in line goes before the other background ones: a request waits for it now.
          this.#writer.promote(running!);
          await waited(this.#flights.wait(running!, input.signal)).catch((error: unknown) => {
            if (input.signal.aborted) throw error;
          });
          continue;
        case 'too-large':
          throw this.#tooLarge(decision.needed, budget, request, decision.summaryTokens);
        case 'prune': {
          const { plan, boundary } = decision;
          const report = prunedLine({ results: plan.pruned, before: originalSize, after: plan.size });
          const epoch = prunedEpoch(hashes, candidate, plan.messages, boundary, report);
          await this.#store.save(epoch);
          this.#logger?.info({ model, tier: 'prune' }, report);
          this.#observer?.compaction({ model, tier: 'prune', outcome: 'compacted', tokensBefore: originalSize, tokensAfter: plan.size, pending: false });
          return this.#forward(epoch, input, request);
        }
        case 'summarize':
        case 'steps': {
          const epoch = await waited(
            this.#flights.run(
              seenWhole(request).key,
              (signal) => this.#writer.write(request, candidate, decision, { signal, onProgress: input.onProgress, pending: false }),
              input.signal,
            ),
          );
          // Counted where the summary was tried, once, not by each request that waited for it.
          if (epoch === null) return forwardAs([...candidate.messages], { report: null });
          return this.#forward(epoch, input, request);
        }
      }
    }
  }

  /** The 400 for a history that cannot fit even compacted, counted. */
  #tooLarge(needed: number, budget: Budget, request: CompactionRequest, summaryTokens: number): ContextLengthExceededError {
    this.#observer?.compaction({ model: request.model, tier: null, outcome: 'too-large', tokensBefore: request.originalSize, tokensAfter: needed + summaryTokens, pending: false });
    return new ContextLengthExceededError(needed, budget.window ?? 0, budget.reserve, summaryTokens);
  }

  /** Starts the next epoch in the background (single flight), unless one is already pending or running for this conversation. */
  #startBackground(request: CompactionRequest, current: Candidate, currentSizes: CandidateSizes, pending: Epoch | null): void {
    // The lookup's pending epoch lies beyond the epoch in use (the lookup dropped stale ones).
    if (pending !== null || this.#runningFor(request.hashes) !== undefined) return;
    // Within a failure's back-off there is nothing to try: each request of the conversation counted a failed compaction here.
    if (this.backoff.has(this.#writer.conversationOf(request))) return;
    // The flight is taken at once, so a request crossing the threshold meanwhile waits for it rather than start another.
    this.#flights.run(seenWhole(request).key, (signal) => this.#prepareAhead(request, current, currentSizes, signal)).catch((error: unknown) => {
      this.#logger?.warn({ model: request.model, reason: error instanceof Error ? error.message : String(error) }, 'background summary failed');
    });
  }

  /** The background epoch: on top of a truncation, written from the original messages, and in use at once (it replaces the truncation). */
  async #prepareAhead(request: CompactionRequest, current: Candidate, currentSizes: CandidateSizes, signal: AbortSignal): Promise<Epoch | null> {
    // Looked up again: the request's own lookup is older than its answer, and the background epoch of the
    // request before it (keyed by that shorter history) may have been written since. After the answer, off the hot path.
    if ((await this.#store.lookup(request.hashes)).pending !== null) return null;
    const repair = derivesFromTruncation(current.epoch);
    const { candidate, sizes } = repair ? await this.#beneath(request, current) : { candidate: current, sizes: currentSizes };
    const decision: SummaryDecision | null = decideAhead(candidate, sizes, request.budget, this.#settings);
    if (decision === null) return null;
    return this.#writer.write(request, candidate, decision, { signal, onProgress: undefined, pending: true, inUse: repair });
  }

  /** Whether a compaction of this candidate must be planned from beneath its truncation: it stands on one, and a summary may be tried. */
  #repairs(request: CompactionRequest, candidate: Candidate): boolean {
    return derivesFromTruncation(candidate.epoch) && !this.backoff.has(this.#writer.conversationOf(request));
  }

  /** The candidate made of the original messages beneath the candidate's truncation, and its sizes. */
  async #beneath(request: CompactionRequest, candidate: Candidate): Promise<{ candidate: Candidate; sizes: CandidateSizes }> {
    const beneath = candidateOf(request.messages, await epochBeneath(this.#store, request.hashes, candidate.epoch!));
    const ratio = this.ratios.get(request.model, request.tenant);
    return { candidate: beneath, sizes: { ...sizesOf(beneath.messages, request.toolsEstimate, ratio), ratio } };
  }

  /** Forwards `epoch` applied to the history, after checking that it leaves room for the answer. */
  async #forward(epoch: Epoch, input: PrepareInput, request: CompactionRequest): Promise<Prepared> {
    const forwarded = [...epoch.replacement, ...request.messages.slice(epoch.sourceLength)];
    const estimate = estimateRequestTokens({ messages: forwarded }) + request.toolsEstimate;
    const { budget } = request;
    if (budget.tokens !== null) {
      let size = estimate * this.ratios.get(request.model, request.tenant);
      if (isNear(size, budget.tokens)) {
        const exact = await this.#counter.count({ ...request.body, messages: forwarded }, input.signal, request.headers);
        if (exact !== null) {
          this.learn(request.model, request.tenant, exact, estimate);
          size = exact;
        }
      }
      if (size > budget.tokens) throw this.#tooLarge(size, budget, request, 0);
    }
    return { messages: forwarded, changed: true, report: epoch.report, estimate, epoch: 'new' };
  }

  /**
   * Observe mode past the fast path: one lookup (an epoch another replica
   * wrote still counts), one decision, said and counted, nothing done. The
   * client's messages are forwarded as they came, oversized results included.
   */
  async #observe(input: PrepareInput, request: CompactionRequest, forwardAs: ForwardAs): Promise<Prepared> {
    const { hashes, messages, model, budget, toolsEstimate, originalSize } = request;
    const ratio = this.ratios.get(model, request.tenant);
    const { inUse, pending } = await this.#store.lookup(hashes);
    const candidate = candidateOf(messages, inUse);
    this.#observer?.epochLookup(candidate.epoch !== null);
    const sizes: CandidateSizes = { ...sizesOf(candidate.messages, toolsEstimate, ratio), ratio };
    const decision = decide(candidate, sizes, budget, { pending, running: false, attempt: 0 }, this.#settings);
    const observed = observedDecision(decision, { before: originalSize, budget, reusing: candidate.epoch !== null });
    if (observed.counted) {
      this.#observer?.compaction({ model, tier: observed.tier, outcome: 'observed', tokensBefore: originalSize, tokensAfter: observed.after, pending: false });
    }
    if (observed.line !== null) this.#logger?.info({ model, mode: 'observe', tier: observed.tier }, observed.line);
    return forwardAs(input.request.messages, { report: observed.line });
  }

  /** Sizes scaled to the upstream's exact count of the candidate, when it gives one. */
  async #measured(request: CompactionRequest, messages: readonly ChatMessage[], sizes: CandidateSizes, signal: AbortSignal): Promise<CandidateSizes> {
    const exact = await this.#counter.count({ ...request.body, messages }, signal, request.headers);
    if (exact === null) return sizes;
    this.learn(request.model, request.tenant, exact, estimateRequestTokens({ messages }) + request.toolsEstimate);
    return { ...scaledTo(sizes, exact), ratio: sizes.ratio };
  }

  /** The key of the summary running for a prefix of this history, if any. */
  #runningFor(hashes: readonly string[]): string | undefined {
    if (this.#flights.size === 0) return undefined;
    for (let index = hashes.length - 1; index >= 0; index--) if (this.#flights.has(hashes[index]!)) return hashes[index];
    return undefined;
  }

}

/** How a request goes on: the messages to forward, and what is said and kept about them. */
interface Forwarding {
  readonly report: string | null;
  /** The bytes/4 estimate of the messages; measured when absent. */
  readonly estimate?: number;
  readonly afterResponse?: (() => void) | undefined;
  readonly epoch?: Prepared['epoch'];
}

type ForwardAs = (messages: ChatMessage[], forwarding: Forwarding) => Prepared;

/** Whether a decision makes a new epoch from the candidate. */
function compacts(decision: Decision): decision is Extract<Decision, { kind: 'prune' | 'summarize' | 'steps' }> {
  return decision.kind === 'prune' || decision.kind === 'summarize' || decision.kind === 'steps';
}
