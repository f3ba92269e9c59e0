import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { CompactionEvent, CompactionObserver, SummaryEvent } from '../../compaction/ports.js';
import type { PairProblem } from '../../transcript/pairs.js';
import type { LearnedSpeed, ServerSeconds } from '../../upstream/server-speeds.js';
import { BREAK_CAUSES, type PrefixBreak } from '../ledger/prefix-breaks.js';
import type { RouteKind } from '../edge/request-record.js';
import { BUILT_IN_TIERS } from '../../compaction/policy/tiers/list.js';
import { ModelLabels } from './model-labels.js';

/**
 * The Prometheus metrics of one app (`GET /metrics`), with prom-client.
 *
 * Each app has its own registry, so tests that build several apps in one
 * process never collide; the process metrics (CPU, memory, event loop, GC)
 * describe the process, not an app, so they live in one registry per process
 * and are appended to every app's scrape.
 *
 * Every metric compactor publishes is declared here, with its buckets and
 * labels, in one place a person reads against the README's table (the
 * bounded model label is model-labels.ts's).
 *
 * On the request path only counters and histograms move (a few additions);
 * everything else is read when Prometheus scrapes.
 */

/** A chat answer's prompt tokens, as the upstream counted them. */
export interface PromptTokens {
  readonly model: string;
  /** The history as the client sent it (the forwarded count scaled by what compaction removed). */
  readonly sent: number;
  /** What was forwarded: the upstream's own count. */
  readonly forwarded: number;
  /** Of those, what the upstream served from its cache (llama-server's KV cache, OpenAI's cached tokens). */
  readonly cached: number;
}

/** What the gauges read at scrape time. */
export interface MetricsSources {
  /** Epochs in the cache (`CompactionEngine.epochCount`). */
  readonly epochCount?: () => number;
  /** What those epochs cost in bytes (`CompactionEngine.epochBytes`). */
  readonly epochBytes?: () => number;
  /** Summary computations running (`CompactionEngine.runningSummaries`). */
  readonly runningSummaries?: () => number;
  /** The learned server speeds (`ServerSpeeds.snapshot`). */
  readonly speeds?: () => readonly LearnedSpeed[];
}

/** Time to the upstream's response headers: loopback JSON calls take milliseconds, a local model reading a long prompt minutes. */
const UPSTREAM_SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/** Summaries are model calls that write up to `summary.max_tokens`: seconds to minutes. */
const SUMMARY_SECONDS_BUCKETS = [0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300];

/** Prompt sizes from a small chat to the largest windows served (1k to 1M tokens, doubling). */
const TOKEN_BUCKETS = Array.from({ length: 11 }, (_, index) => 1024 * 2 ** index);

/** A whole request, start to last byte: from an ops probe's milliseconds to a long answer streamed for many minutes. */
const REQUEST_SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800];

/**
 * The engine's words as metric labels. The labels were published before the
 * engine's words settled (README.md § Metrics), so two differ: no tier is
 * `none`, and `too-large` is `too_large`.
 */
function compactionLabels(event: CompactionEvent): { tier: string; outcome: string } {
  return { tier: event.tier ?? 'none', outcome: event.outcome === 'too-large' ? 'too_large' : event.outcome };
}

/** Outcomes that made an epoch: the only ones whose size after is the size of something forwarded. */
const MADE_AN_EPOCH: ReadonlySet<CompactionEvent['outcome']> = new Set(['compacted', 'prepared', 'truncated']);

let processRegistry: Registry | undefined;

/** The process metrics, collected once per process whatever the number of apps. */
function processMetrics(): Registry {
  if (processRegistry === undefined) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

/** The `tier` label's values: each tier's name (policy/tiers/list.ts), and `none` for a compaction no tier could make. */
const TIER_LABELS = [...BUILT_IN_TIERS.map((tier) => tier.name), 'none'].join(', ');

export class Metrics implements CompactionObserver {
  readonly registry = new Registry();
  #sources: MetricsSources = {};
  readonly #models = new ModelLabels();

  readonly #requests = new Counter({
    name: 'compactor_requests_total',
    help: 'Requests answered, by route (chat, compact, passthrough, ops, dashboard) and HTTP status.',
    labelNames: ['route', 'status'] as const,
    registers: [this.registry],
  });

  readonly #upstreamSeconds = new Histogram({
    name: 'compactor_upstream_response_seconds',
    help: 'Time from sending a request upstream to its response headers, by route.',
    labelNames: ['route'] as const,
    buckets: UPSTREAM_SECONDS_BUCKETS,
    registers: [this.registry],
  });

  readonly #requestSeconds = new Histogram({
    name: 'compactor_request_duration_seconds',
    help: 'Time from a request arriving to the last byte of its answer (or its end), by route.',
    labelNames: ['route'] as const,
    buckets: REQUEST_SECONDS_BUCKETS,
    registers: [this.registry],
  });

  readonly #compactions = new Counter({
    name: 'compactor_compactions_total',
    help: `Compactions, each counted once, by model (the first 64, then "other"), tier (${TIER_LABELS}) and outcome (compacted, prepared, truncated, forwarded, failed, too_large, observed: what observe mode would have done, once per request).`,
    labelNames: ['model', 'tier', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly #compactionTokens = new Histogram({
    name: 'compactor_compaction_tokens',
    help: 'Prompt size in tokens of conversations a compaction made an epoch for (compacted, prepared, truncated), before (as the client sent it) and after (as forwarded).',
    labelNames: ['stage'] as const,
    buckets: TOKEN_BUCKETS,
    registers: [this.registry],
  });

  readonly #summarySeconds = new Histogram({
    name: 'compactor_summary_duration_seconds',
    help: 'Time to write one summary (all its upstream calls), by outcome (ok, failed, timeout).',
    labelNames: ['outcome'] as const,
    buckets: SUMMARY_SECONDS_BUCKETS,
    registers: [this.registry],
  });

  readonly #summaryCalls = new Counter({
    name: 'compactor_summary_calls_total',
    help: 'Upstream calls made to write summaries (a folded summary makes one per chunk).',
    registers: [this.registry],
  });

  readonly #summaryWaits = new Counter({
    name: 'compactor_summary_waits_total',
    help: 'Chat requests that waited for a summary (their own, or one running for their conversation) before being forwarded; a crossing whose epoch was prepared in the background waits for none.',
    registers: [this.registry],
  });

  readonly #summaryWaitSeconds = new Histogram({
    name: 'compactor_summary_wait_seconds',
    help: 'Time a chat request waited for summaries before being forwarded (requests that waited for one).',
    buckets: SUMMARY_SECONDS_BUCKETS,
    registers: [this.registry],
  });

  readonly #summariesDropped = new Counter({
    name: 'compactor_summaries_dropped_total',
    help: 'Summaries dropped from the queue or refused a place in it, by the limit that did it (compaction.summary.max_queued_per_tenant, compaction.summary.max_queued_background, or waited too long).',
    labelNames: ['limit'] as const,
    registers: [this.registry],
  });

  readonly #epochLookups = new Counter({
    name: 'compactor_epoch_lookups_total',
    help: 'Epoch cache lookups of requests past the fast path, by result (hit, miss).',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  readonly #storeBadValues = new Counter({
    name: 'compactor_store_bad_values_total',
    help: 'Values read from the epoch store that were not a valid epoch (treated as misses), by reason: unsigned, signature, too-large, encoding, json, schema.',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  readonly #storeFaults = new Counter({
    name: 'compactor_store_faults_total',
    help: 'Epoch store commands that failed or timed out (the request went on with memory), by operation.',
    labelNames: ['operation'] as const,
    registers: [this.registry],
  });

  readonly #pairRepairs = new Counter({
    name: 'compactor_pair_repairs_total',
    help: 'Tool-call pairs repaired, by kind (orphan, misplaced, duplicate, missing).',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });

  readonly #clientTokens = new Counter({
    name: 'compactor_client_prompt_tokens_total',
    help: 'Prompt tokens of answered chat requests as the client sent them (the upstream count scaled by what compaction removed), by model.',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });

  readonly #forwardedTokens = new Counter({
    name: 'compactor_forwarded_prompt_tokens_total',
    help: 'Prompt tokens of answered chat requests as forwarded, as the upstream counted them (usage.prompt_tokens, else timings), by model.',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });

  readonly #cachedTokens = new Counter({
    name: 'compactor_cached_prompt_tokens_total',
    help: "Forwarded prompt tokens the upstream served from its cache (llama-server's timings.cache_n, usage.prompt_tokens_details.cached_tokens), by model.",
    labelNames: ['model'] as const,
    registers: [this.registry],
  });

  readonly #contextExceeded = new Counter({
    name: 'compactor_upstream_context_exceeded_total',
    help: "Chat requests the upstream refused as larger than its context (llama-server's exceed_context_size_error, OpenAI's context_length_exceeded), by model.",
    labelNames: ['model'] as const,
    registers: [this.registry],
  });

  readonly #compactionItems = new Counter({
    name: 'compactor_compaction_items_total',
    help: 'Responses compaction items (issue 38), by outcome: sealed (answered by /v1/responses/compact), opened (a request carried one, forwarded as its notes), refused (altered or not this deployment\'s: a 400).',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly #serverSeconds = new Counter({
    name: 'compactor_upstream_seconds_total',
    help: "Seconds the upstream spent on answers, by kind (prefill: reading the prompt, decode: writing the answer) and call (main: a client's request, summary: compactor's own): llama-server's timings, else tokens at the learned speeds.",
    labelNames: ['kind', 'call'] as const,
    registers: [this.registry],
  });

  readonly #prefixBreaks = new Counter({
    name: 'compactor_prefix_breaks_total',
    help: 'Forwarded requests whose prompt differs from the previous one of their conversation before its end, by cause (client, compression, summary, truncation, prune, repair; slot: another slot than last time; server: the server reused fewer tokens than the unchanged prefix).',
    labelNames: ['cause'] as const,
    registers: [this.registry],
  });

  readonly #recomputedTokens = new Counter({
    name: 'compactor_prefix_tokens_recomputed_total',
    help: 'Prompt tokens after a prefix break that the server had read before and read again, by cause (as compactor_prefix_breaks_total).',
    labelNames: ['cause'] as const,
    registers: [this.registry],
  });

  readonly #activeStreams = new Gauge({
    name: 'compactor_active_streams',
    help: 'Streamed (SSE) chat answers being relayed now.',
    registers: [this.registry],
  });

  constructor() {
    // Every series of the ledger exists from the start, at 0, so a dashboard's rate() and a person's grep find them.
    for (const kind of ['prefill', 'decode']) for (const call of ['main', 'summary']) this.#serverSeconds.inc({ kind, call }, 0);
    for (const cause of BREAK_CAUSES) {
      this.#prefixBreaks.inc({ cause }, 0);
      this.#recomputedTokens.inc({ cause }, 0);
    }
    const sources = (): MetricsSources => this.#sources;
    new Gauge({
      name: 'compactor_epoch_cache_entries',
      help: 'Epochs held in the cache of this instance.',
      registers: [this.registry],
      collect() {
        this.set(sources().epochCount?.() ?? 0);
      },
    });
    new Gauge({
      name: 'compactor_epoch_cache_bytes',
      help: "What the epochs held in this instance's memory cost, in bytes (about; cache.max_bytes bounds it).",
      registers: [this.registry],
      collect() {
        this.set(sources().epochBytes?.() ?? 0);
      },
    });
    new Gauge({
      name: 'compactor_server_tokens_per_second',
      help: 'The learned speed of each upstream and model (smoothed over its last answers), by kind: prefill (prompt tokens read) or decode (tokens written).',
      labelNames: ['upstream', 'model', 'kind'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const speed of sources().speeds?.() ?? []) {
          if (speed.prefill !== null) this.set({ upstream: speed.upstream, model: speed.model, kind: 'prefill' }, speed.prefill);
          if (speed.decode !== null) this.set({ upstream: speed.upstream, model: speed.model, kind: 'decode' }, speed.decode);
        }
      },
    });
    new Gauge({
      name: 'compactor_summaries_running',
      help: 'Summary computations running now.',
      registers: [this.registry],
      collect() {
        this.set(sources().runningSummaries?.() ?? 0);
      },
    });
  }

  /** Where the gauges read from (the engine, once it is built; the speeds). */
  watch(sources: MetricsSources): void {
    this.#sources = { ...this.#sources, ...sources };
  }

  /** What the upstream spent on one answer (server-ledger.ts). */
  upstreamSeconds(call: 'main' | 'summary', seconds: ServerSeconds): void {
    if (seconds.prefill > 0) this.#serverSeconds.inc({ kind: 'prefill', call }, seconds.prefill);
    if (seconds.decode > 0) this.#serverSeconds.inc({ kind: 'decode', call }, seconds.decode);
  }

  /** One request's prefix breaks (prefix-breaks.ts). */
  prefixBreaks(breaks: readonly PrefixBreak[]): void {
    for (const broken of breaks) {
      this.#prefixBreaks.inc({ cause: broken.cause });
      if (broken.recomputedTokens > 0) this.#recomputedTokens.inc({ cause: broken.cause }, broken.recomputedTokens);
    }
  }

  /**
   * One request answered (or ended early): its status (that of the error
   * event when a stream ended in one), its whole duration, and `upstreamMs`
   * when it was sent upstream.
   */
  request(route: RouteKind, status: number, totalMs: number, upstreamMs: number | null): void {
    this.#requests.inc({ route, status });
    this.#requestSeconds.observe({ route }, totalMs / 1000);
    if (upstreamMs !== null) this.#upstreamSeconds.observe({ route }, upstreamMs / 1000);
  }

  promptTokens(tokens: PromptTokens): void {
    const labels = { model: this.#models.of(tokens.model) };
    this.#clientTokens.inc(labels, tokens.sent);
    this.#forwardedTokens.inc(labels, tokens.forwarded);
    if (tokens.cached > 0) this.#cachedTokens.inc(labels, tokens.cached);
  }

  /** A Responses compaction item sealed, opened or refused (issue 38). */
  compactionItem(outcome: 'sealed' | 'opened' | 'refused', count = 1): void {
    this.#compactionItems.inc({ outcome }, count);
  }

  contextExceeded(model: string): void {
    this.#contextExceeded.inc({ model: this.#models.of(model) });
  }

  pairRepairs(repairs: readonly PairProblem[]): void {
    // Counted by kind first: one request may repair tens of thousands of pairs, and each inc() looks its labels up.
    const byKind = new Map<PairProblem['kind'], number>();
    for (const repair of repairs) byKind.set(repair.kind, (byKind.get(repair.kind) ?? 0) + 1);
    for (const [kind, count] of byKind) this.#pairRepairs.inc({ kind }, count);
  }

  streamOpened(): void {
    this.#activeStreams.inc();
  }

  streamClosed(): void {
    this.#activeStreams.dec();
  }

  compaction(event: CompactionEvent): void {
    this.#compactions.inc({ model: this.#models.of(event.model), ...compactionLabels(event) });
    if (!MADE_AN_EPOCH.has(event.outcome)) return;
    this.#compactionTokens.observe({ stage: 'before' }, event.tokensBefore);
    this.#compactionTokens.observe({ stage: 'after' }, event.tokensAfter);
  }

  summary(event: SummaryEvent): void {
    this.#summarySeconds.observe({ outcome: event.outcome }, event.milliseconds / 1000);
    this.#summaryCalls.inc(event.calls);
  }

  summaryWait(milliseconds: number): void {
    this.#summaryWaits.inc();
    this.#summaryWaitSeconds.observe(milliseconds / 1000);
  }

  summaryDropped(limit: string): void {
    this.#summariesDropped.inc({ limit });
  }

  epochLookup(hit: boolean): void {
    this.#epochLookups.inc({ result: hit ? 'hit' : 'miss' });
  }

  /** A value read from a shared epoch store was not an epoch it may use (`reason`: unsigned, signature, too-large, …): a miss. */
  storeBadValue(reason: string): void {
    this.#storeBadValues.inc({ reason });
  }

  /** A shared epoch store's command failed or timed out; the request went on with memory. */
  storeFault(operation: string): void {
    this.#storeFaults.inc({ operation });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The scrape: this app's metrics, then the process's. */
  async text(): Promise<string> {
    const [app, process] = await Promise.all([this.registry.metrics(), processMetrics().metrics()]);
    return `${app}\n${process}`;
  }
}
