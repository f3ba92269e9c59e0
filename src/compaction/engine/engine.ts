import { type Config, type ModelConfig, modelSettingsOf } from '../../config/schema.js';
import type { ChatMessage } from '../../transcript/message.js';
import { estimateRequestTokens, estimateToolsTokens } from '../../transcript/tokens.js';
import { SummaryBackoff, sharedBackoffOf } from '../summary-calls/backoff.js';
import { budgetOf } from '../policy/budget.js';
import { ContextWindows } from '../sizes/context-window.js';
import { windowNotices } from '../sizes/window-notices.js';
import type { CostSpeeds } from '../policy/cost.js';
import { type CandidateSizes, type DecisionSettings, type TierDecision, compacts, decide, decisionSettingsOf, skipsLookup } from '../policy/decide.js';
import { MemoryEpochStore } from '../epochs/epoch-store.js';
import { EpochRepository } from '../epochs/repository.js';
import type { SharedLearning } from '../epochs/learning.js';
import type { Epoch } from '../types.js';
import { KnownPrefixes } from '../epochs/known-prefixes.js';
import { SingleFlight } from '../epochs/single-flight.js';
import { EpochWriter } from './epoch-writer.js';
import { ExactCounter } from '../sizes/exact-count.js';
import { ExactSizes } from '../sizes/exact-sizes.js';
import type { ChatCall, CompactionLogger, CompactionObserver } from '../ports.js';
import { type Compacted, type CompactionInput, type CompactionRequest, compactedOf, seenWhole } from './request.js';
import { candidateOf } from '../policy/plan.js';
import { oversizedCount, pruneOversizedResults, prunedReport, withOversizedStep } from '../policy/oversized.js';
import { reusedLine, wouldLine } from '../policy/report.js';
import { forcedSettings } from '../policy/observe-mode.js';
import { observeOnce } from './observe-pass.js';
import { BUILT_IN_TIERS, tierNamed } from '../policy/tiers/list.js';
import type { ModelDecision, TierList } from '../policy/tiers/tier.js';
import { type EditedPolicy, editedPolicy } from '../policy/context-edits.js';
import { appliedPending } from '../policy/applied-pending.js';
import { isNear, sizesOf, totalSize } from '../policy/sizing.js';
import { yieldOnLongHistory } from './long-history.js';
import { Background } from './background.js';
import { RatioSharing } from '../sizes/ratio-sharing.js';
import { ReplicaRounds, type Step } from './replica-rounds.js';
import { TokenRatios } from '../sizes/token-ratio.js';
import type { UpstreamJson } from '../../upstream/json-surface.js';

export type { Compacted, CompactionInput } from './request.js';

/**
 * The compaction engine: per chat request, gathers what {@link decide} needs
 * (the window, the learned ratio, prefix hashes, epochs, exact counts near a
 * threshold), and performs what it decides: forward, apply an epoch, wait for
 * a running summary, prune, compress, summarize (through {@link EpochWriter}), refuse.
 *
 * It is stateless towards the client (which keeps sending its whole history)
 * and remembers, per conversation prefix, what it replaced that prefix with
 * (an epoch), so the same history is always rewritten the same way: one
 * summary per epoch, and a forwarded prompt whose beginning stays
 * byte-identical from request to request.
 *
 * Its parts live in their own files: the decisions in policy/, writing an epoch in epoch-writer.ts, observe mode's
 * one pass in observe-pass.ts, sharing learned ratios in ratio-sharing.ts, agreeing with other replicas in replica-rounds.ts.
 */

export interface CompactionEngineOptions {
  readonly config: Config;
  /** The upstream's JSON surface: window discovery and exact counts. */
  readonly upstream: UpstreamJson;
  /** One non-streamed chat completion for summaries (the summary upstream, when configured). */
  readonly chat: ChatCall;
  /** The epochs repository (a memory store alone is made one); a shared one brings its learning port. */
  readonly store?: EpochRepository | MemoryEpochStore;
  readonly now?: () => number;
  readonly logger?: CompactionLogger;
  /** The summary system prompt (the contents of `summary.prompt_file`), when replaced. */
  readonly summaryPrompt?: string;
  /** Told of each compaction, summary and epoch lookup (the metrics). */
  readonly observer?: CompactionObserver;
  /** The compaction tiers, cheapest first (policy/tiers/list.ts); the built-in list when absent. */
  readonly tiers?: TierList;
  /** The upstream's learned speeds of a model (upstream/server-speeds.ts), for decisions by cost (`compaction.decide_by_cost`). */
  readonly speeds?: (model: string) => CostSpeeds | null;
}

export class CompactionEngine {
  readonly windows: ContextWindows;
  readonly ratios: TokenRatios;
  /** Conversations whose summary failed within the last minute. */
  readonly backoff: SummaryBackoff;
  readonly #config: Config;
  readonly #settings: DecisionSettings;
  readonly #tiers: TierList;
  readonly #epochs: EpochRepository;
  readonly #learning: SharedLearning | undefined;
  readonly #logger: CompactionLogger | undefined;
  readonly #observer: CompactionObserver | undefined;
  readonly #flights = new SingleFlight<Epoch | null>();
  readonly #writer: EpochWriter;
  readonly #now: () => number;
  readonly #sharing: RatioSharing;
  readonly #background: Background;
  readonly #sizes: ExactSizes;
  /**
   * A known conversation's chain of prefix hashes: a request is hashed only past what it held. Public: the
   * chat route takes each request's print from the same records (the prefix-break ledger's digests, the
   * dashboard's id), so a request's bytes are proved once for both.
   */
  readonly prefixes = new KnownPrefixes();
  /** The upstream's learned speeds, when the soft zone decides by cost. */
  readonly #speeds: ((model: string) => CostSpeeds | null) | undefined;

  constructor(options: CompactionEngineOptions) {
    const { config, now = Date.now } = options;
    this.#config = config;
    this.#now = now;
    const compaction = config.compaction;
    this.#settings = decisionSettingsOf(compaction);
    this.#tiers = options.tiers ?? BUILT_IN_TIERS;
    this.#speeds = compaction.decide_by_cost ? options.speeds : undefined;
    const store = options.store ?? new MemoryEpochStore({ maxEntries: config.cache.max_entries, maxBytes: config.cache.max_bytes, ttlMs: config.cache.ttl_s * 1000, now });
    this.#epochs = store instanceof MemoryEpochStore ? EpochRepository.inMemory(store) : store;
    this.#learning = this.#epochs.learning;
    this.#logger = options.logger;
    this.#observer = options.observer;
    this.ratios = new TokenRatios({ shared: this.#learning !== undefined });
    this.backoff = new SummaryBackoff(now, sharedBackoffOf(this.#learning));
    this.#writer = new EpochWriter({
      config: compaction,
      chat: options.chat,
      epochs: this.#epochs,
      ratios: this.ratios,
      backoff: this.backoff,
      now,
      logger: options.logger,
      observer: options.observer,
      summaryPrompt: options.summaryPrompt,
      learnedWindowUntil: (model) => this.windows.learnedUntil(model),
      tiers: this.#tiers,
    });
    this.#sharing = new RatioSharing(this.#learning, this.ratios);
    this.#sizes = new ExactSizes({ counter: new ExactCounter(options.upstream, now), ratios: this.ratios, sharing: this.#sharing, observer: options.observer });
    this.#background = new Background({
      epochs: this.#epochs,
      flights: this.#flights,
      writer: this.#writer,
      backoff: this.backoff,
      ratios: this.ratios,
      settings: this.#settings,
      tiers: this.#tiers,
      logger: options.logger,
    });
    this.windows = new ContextWindows({
      configured: (model) => this.#modelConfig(model).context_window,
      upstream: options.upstream,
      now,
      minLearnedWindow: compaction.min_learned_window,
      ...windowNotices(options.logger),
    });
  }

  /** Summary computations running now (for metrics and tests). */
  get runningSummaries(): number {
    return this.#flights.size;
  }

  /** Summaries waiting for a slot (for tests). */
  get queuedSummaries(): number {
    return this.#writer.queued;
  }

  /** Epochs held in this process (for metrics). */
  get epochCount(): number {
    return this.#epochs.size;
  }

  /** What the epochs held in this process cost, in bytes about (for metrics). */
  get epochBytes(): number {
    return this.#epochs.bytes;
  }

  /** Takes the upstream's real prompt size for a tenant's forwarded request. */
  learn(model: string, tenant: string, promptTokens: number, estimate: number): void {
    this.#sharing.learn(model, tenant, promptTokens, estimate);
  }

  /** Gives the ratio measures taken since the last share to a shared store now (the timer's work; tests call it). */
  async shareRatios(): Promise<void> {
    await this.#sharing.share();
  }

  #modelConfig(model: string): ModelConfig {
    return modelSettingsOf(this.#config.models, model);
  }

  /**
   * What to forward for one chat request: the history as it came, or with an
   * epoch applied, or compacted now (which makes a new epoch).
   *
   * Throws {@link ContextLengthExceededError} when even the last turn cannot
   * fit, and `SummaryFailedError` when a summary fails and
   * `on_summary_failure` is `error`.
   */
  async compact(input: CompactionInput): Promise<Compacted> {
    const { model, chatBody: body } = input.request;
    // Stringified once: an agent's tool definitions run to tens of kilobytes.
    const toolsEstimate = estimateToolsTokens(input.request.tools);
    const estimateOf = (messages: readonly ChatMessage[]): number => estimateRequestTokens({ messages }) + toolsEstimate;
    const mode = input.mode ?? 'compact';
    if (!this.#config.compaction.enabled) return compactedOf(input, { messages: input.request.messages, report: null, estimate: estimateOf(input.request.messages) });

    const window = await this.windows.get(model, input.upstreamHeaders);
    const budget = budgetOf(window, input.request.maxOutputTokens, this.#modelConfig(model).reserve_output_tokens, this.#config.compaction.summary.max_tokens);
    const ratio = this.ratios.get(model, input.tenant);
    const messages = pruneOversizedResults(input.request.messages, budget.tokens);
    const estimate = estimateOf(messages);
    // Decisions are made on the pruned history (what could be forwarded); reports say what the client sent.
    const prunedSize = estimate * ratio;
    const clientSize = messages === input.request.messages ? prunedSize : estimateOf(input.request.messages) * ratio;
    const oversized = oversizedCount(input.request.messages, messages);
    // A request's context edits (policy/context-edits.ts) bring their own tiers and triggers.
    const policy: EditedPolicy = input.edits === undefined ? { settings: this.#settings, tiers: this.#tiers } : editedPolicy(this.#settings, input.edits, this.#tiers);
    const onlyPruned = (): string => (mode === 'observe' ? wouldLine : String)(prunedReport(input.request.messages, messages, estimateOf, ratio));
    const told = (compacted: Compacted): Compacted => ({ ...compacted, report: withOversizedStep(compacted.report, oversized, mode === 'observe', onlyPruned), clientTokens: clientSize });

    // Fast path: well under the soft threshold nothing is hashed or looked up. With a shared store, only once this replica holds
    // the tenant's model's ratio (read beside a lookup): at the initial one it would forward raw what the others compact.
    const ratioSettled = this.#learning === undefined || this.ratios.known(model, input.tenant);
    if (mode !== 'force' && ratioSettled && skipsLookup(prunedSize, messages.length, budget, policy.settings)) {
      const line = messages === input.request.messages ? null : prunedReport(input.request.messages, messages, estimateOf, ratio);
      if (mode === 'observe') return { ...compactedOf(input, { messages: input.request.messages, report: line === null ? null : wouldLine(line), estimate: estimateOf(input.request.messages) }), clientTokens: clientSize };
      return { ...compactedOf(input, { messages, report: line, estimate }), clientTokens: clientSize };
    }

    // Hashed before pruning: the prefix names what the client sent, whatever the budget of this request.
    await yieldOnLongHistory(messages.length);
    const hashes = this.prefixes.hashesOf({ tenant: input.tenant, model }, input.request.messages, input.sourceBytes);
    await yieldOnLongHistory(messages.length);
    const instructions = policy.summaryInstructions === undefined ? {} : { summaryInstructions: policy.summaryInstructions };
    const request: CompactionRequest = { hashes, tenant: input.tenant, messages, body, model, budget, toolsEstimate, originalSize: clientSize, headers: input.upstreamHeaders, ...instructions };
    if (mode === 'observe') {
      // Observe says what compact would do: by cost too, once the speeds are learned.
      const pass = { epochs: this.#epochs, ratios: this.ratios, settings: this.#settingsFor(request.model, policy.settings), tiers: policy.tiers, observer: this.#observer, logger: this.#logger };
      return told(await observeOnce(pass, input, request));
    }
    const waits = { milliseconds: 0, count: 0 };
    try {
      return told(await this.#decideAndApply(input, request, waits, policy));
    } finally {
      if (waits.count > 0) this.#observer?.summaryWait?.(waits.milliseconds);
    }
  }

  /** By cost once the model's speeds are learned (policy/cost.ts); until then, and when off, by tokens. */
  #settingsFor(model: string, configured: DecisionSettings): DecisionSettings {
    const speeds = this.#speeds?.(model) ?? null;
    return speeds === null ? configured : { ...configured, cost: speeds };
  }

  /** The loop of {@link compact} past the fast path: look up, decide, perform, until something can be forwarded. */
  async #decideAndApply(input: CompactionInput, request: CompactionRequest, waits: { milliseconds: number; count: number }, policy: EditedPolicy): Promise<Compacted> {
    const configured = input.mode === 'force' ? forcedSettings(policy.settings) : policy.settings;
    const { tiers } = policy;
    const settings = this.#settingsFor(request.model, configured);
    let ratio = this.ratios.get(request.model, request.tenant);
    const waited = async <T>(work: Promise<T>): Promise<T> => {
      const started = this.#now();
      waits.count++;
      try {
        return await work;
      } finally {
        waits.milliseconds += this.#now() - started;
      }
    };
    const rounds = new ReplicaRounds(this.#now, this.#config.compaction.summary.timeout_ms);
    for (let attempt = 0; ; attempt++) {
      const step = await this.#decideOnce(input, request, settings, { attempt, rounds }, ratio, tiers);
      ratio = step.ratio;
      if (step.again) continue;
      const compacted = await this.#perform(step, input, request, waited, rounds, tiers);
      if (compacted !== undefined) return compacted;
    }
  }

  /** One look-up and decision over the history as the store knows it now. */
  async #decideOnce(
    input: CompactionInput,
    request: CompactionRequest,
    settings: DecisionSettings,
    { attempt, rounds }: { attempt: number; rounds: ReplicaRounds },
    learned: number,
    tiers: TierList,
  ): Promise<Step> {
    const { hashes, messages, model, budget, toolsEstimate } = request;
    let ratio = learned;
    // The first lookup also reads what other replicas learned (sent at once beside it): the ratio, a summary's back-off.
    const first = rounds.isFirst(attempt);
    const conversation = this.#writer.conversationOf(request);
    const [{ inUse, pending, degraded, runningElsewhere }, shared] = await Promise.all([
      this.#epochs.forConversation(conversation).lookup(hashes, { patient: rounds.patient }),
      first ? this.#learning?.read(request.tenant, model, conversation) : undefined,
    ]);
    if (shared !== undefined) {
      if (shared.ratio !== undefined) this.ratios.adopt(model, request.tenant, shared.ratio);
      if (shared.backoffMs !== undefined) this.backoff.adopt(conversation, shared.backoffMs);
      ratio = this.ratios.get(model, request.tenant);
    }
    let candidate = candidateOf(messages, inUse);
    if (first) this.#observer?.epochLookup(candidate.epoch !== null);
    let sizes: CandidateSizes = { ...sizesOf(candidate.messages, toolsEstimate, ratio), ratio };
    if (budget.tokens !== null && isNear(totalSize(sizes), settings.threshold * budget.tokens)) {
      sizes = await this.#sizes.measured(request, candidate.messages, sizes, input.signal);
    }
    const running = this.#background.runningFor(hashes);
    const elsewhere = rounds.runsElsewhere(running, runningElsewhere);
    let decision = decide(candidate, sizes, budget, { pending, running: running !== undefined || elsewhere, attempt: rounds.localWaits }, settings, tiers);
    if (rounds.asksAgain(decision, degraded === true)) return { candidate, sizes, decision, pending, running, ratio, again: true };
    // A compaction on top of a truncation is planned again from the original messages it dropped, once they may be summarized.
    if (compacts(decision) && this.#background.repairs(request, candidate)) {
      const beneath = await this.#background.beneath(request, candidate);
      const redo = decide(beneath.candidate, beneath.sizes, budget, { pending: null, running: false, attempt }, settings, tiers);
      if (compacts(redo)) [candidate, decision] = [beneath.candidate, redo];
    }
    return { candidate, sizes, decision, pending, running, ratio, ...(runningElsewhere === undefined ? {} : { runningElsewhere }) };
  }

  /** Performs one decision: what to forward, or undefined to look up and decide again. */
  async #perform(
    step: Step,
    input: CompactionInput,
    request: CompactionRequest,
    waited: <T>(work: Promise<T>) => Promise<T>,
    rounds: ReplicaRounds,
    tiers: TierList,
  ): Promise<Compacted | undefined> {
    const { candidate, sizes, decision, pending, running } = step;
    const { hashes, messages, model, budget, originalSize } = request;
    const epochs = this.#epochs.forHistory(request);
    switch (decision.kind) {
      case 'forward': {
        const reused = candidate.epoch === null ? null : reusedLine({ before: originalSize, after: decision.size });
        // Between the soft threshold and the threshold: once the answer is streamed, prepare the next epoch (unless another replica does).
        const background = decision.prepareNext && step.runningElsewhere === undefined ? () => this.#background.start(request, candidate, sizes, pending) : undefined;
        const forwarded = candidate.epoch === null ? messages : [...candidate.messages];
        return compactedOf(input, {
          messages: forwarded,
          report: reused,
          estimate: estimateRequestTokens({ messages: forwarded }) + request.toolsEstimate,
          afterResponse: background,
          epoch: candidate.epoch === null ? 'none' : 'reused',
          notes: candidate.epoch?.notes,
        });
      }
      case 'apply-pending':
        await epochs.save(appliedPending(decision.epoch, request, this.#settings, step.ratio));
        return undefined;
      case 'wait':
        input.onProgress?.(`compacting (waiting for the summary already running)`);
        // On another replica (see ReplicaRounds): looked up again until its epoch is stored or its lease is gone.
        if (running === undefined) return void (await waited(rounds.pollElsewhere(input.signal)));
        rounds.localWaits++;
        // A background summary still in line goes before the other background ones.
        this.#writer.promote(running);
        await waited(this.#flights.wait(running, input.signal)).catch((error: unknown) => {
          if (input.signal.aborted) throw error;
        });
        return undefined;
      case 'too-large':
        throw this.#sizes.tooLarge(decision.needed, budget, request, decision.summaryTokens);
      default:
        return this.#compacted(decision, step, input, request, waited, tiers);
    }
  }

  /** Performs a tier's decision: its epoch made at once (no model call), or written by a summary call. */
  async #compacted(
    decision: TierDecision,
    step: Step,
    input: CompactionInput,
    request: CompactionRequest,
    waited: <T>(work: Promise<T>) => Promise<T>,
    tiers: TierList,
  ): Promise<Compacted> {
    const { candidate } = step;
    const { hashes, messages, model, originalSize } = request;
    const tier = tierNamed(tiers, decision.kind);
    if (tier === undefined) throw new Error(`no tier is named ${decision.kind}`);
    if (!tier.needsModel) {
      const epoch = tier.epochOf(hashes, candidate, decision, originalSize);
      await this.#epochs.forHistory(request).save(epoch);
      this.#logger?.info({ model, tier: tier.name }, epoch.report);
      const written = { tenant: request.tenant, messages, hashes, report: epoch.report, milliseconds: 0, notes: null };
      this.#observer?.compaction({ model, tier: tier.name, outcome: 'compacted', tokensBefore: originalSize, tokensAfter: decision.plan.size, pending: false, written });
      return this.#sizes.applied(epoch, input, request);
    }
    const write = (signal: AbortSignal): Promise<Epoch | null> => this.#writer.write(request, candidate, decision as ModelDecision, { signal, onProgress: input.onProgress, pending: false });
    const epoch = await waited(this.#flights.run(seenWhole(request).key, write, input.signal));
    // Counted where the summary was tried, once, not by each request that waited for it.
    if (epoch === null) {
      const forwarded = [...candidate.messages];
      return compactedOf(input, { messages: forwarded, report: null, estimate: estimateRequestTokens({ messages: forwarded }) + request.toolsEstimate });
    }
    return this.#sizes.applied(epoch, input, request);
  }
}
