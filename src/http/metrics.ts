import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { CompactionEvent, CompactionObserver, SummaryEvent } from '../compaction/observer.js';
import type { PairProblem } from '../transcript/pairs.js';
import type { RouteKind } from './request-state.js';

/**
 * The Prometheus metrics of one app (`GET /metrics`), with prom-client.
 *
 * Each app has its own registry, so tests that build several apps in one
 * process never collide; the process metrics (CPU, memory, event loop, GC)
 * describe the process, not an app, so they live in one registry per process
 * and are appended to every app's scrape.
 *
 * On the request path only counters and histograms move (a few additions);
 * everything else is read when Prometheus scrapes.
 */

/** Time to the upstream's response headers: loopback JSON calls take milliseconds, a local model reading a long prompt minutes. */
const UPSTREAM_SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/** Summaries are model calls that write up to `summary.max_tokens`: seconds to minutes. */
const SUMMARY_SECONDS_BUCKETS = [0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300];

/** Prompt sizes from a small chat to the largest windows served (1k to 1M tokens, doubling). */
const TOKEN_BUCKETS = Array.from({ length: 11 }, (_, index) => 1024 * 2 ** index);

let processRegistry: Registry | undefined;

/** The process metrics, collected once per process whatever the number of apps. */
function processMetrics(): Registry {
  if (processRegistry === undefined) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

/** What the gauges read at scrape time. */
export interface MetricsSources {
  /** Epochs in the cache (`Compactor.epochCount`). */
  readonly epochCount?: () => number;
  /** Summary computations running (`Compactor.runningSummaries`). */
  readonly runningSummaries?: () => number;
}

export class Metrics implements CompactionObserver {
  readonly registry = new Registry();
  #sources: MetricsSources = {};

  readonly #requests = new Counter({
    name: 'compactor_requests_total',
    help: 'Requests answered, by route (chat, passthrough, ops) and HTTP status.',
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

  readonly #compactions = new Counter({
    name: 'compactor_compactions_total',
    help: 'Compactions, by tier (prune, summary, steps, none) and outcome (compacted, prepared, truncated, forwarded, failed, too_large).',
    labelNames: ['tier', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly #compactionTokens = new Histogram({
    name: 'compactor_compaction_tokens',
    help: 'Prompt size of compacted conversations in tokens, before (as the client sent it) and after (as forwarded).',
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

  readonly #epochLookups = new Counter({
    name: 'compactor_epoch_lookups_total',
    help: 'Epoch cache lookups of requests past the fast path, by result (hit, miss).',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  readonly #pairRepairs = new Counter({
    name: 'compactor_pair_repairs_total',
    help: 'Tool-call pairs repaired, by kind (orphan, misplaced, duplicate, missing).',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });

  readonly #activeStreams = new Gauge({
    name: 'compactor_active_streams',
    help: 'Streamed (SSE) chat answers being relayed now.',
    registers: [this.registry],
  });

  constructor() {
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
      name: 'compactor_summaries_running',
      help: 'Summary computations running now.',
      registers: [this.registry],
      collect() {
        this.set(sources().runningSummaries?.() ?? 0);
      },
    });
  }

  /** Where the gauges read from (the engine, once it is built). */
  watch(sources: MetricsSources): void {
    this.#sources = sources;
  }

  /** One request answered (or ended early); `upstreamMs` when it was sent upstream. */
  request(route: RouteKind, status: number, upstreamMs: number | null): void {
    this.#requests.inc({ route, status });
    if (upstreamMs !== null) this.#upstreamSeconds.observe({ route }, upstreamMs / 1000);
  }

  pairRepairs(repairs: readonly PairProblem[]): void {
    for (const repair of repairs) this.#pairRepairs.inc({ kind: repair.kind });
  }

  streamOpened(): void {
    this.#activeStreams.inc();
  }

  streamClosed(): void {
    this.#activeStreams.dec();
  }

  compaction(event: CompactionEvent): void {
    this.#compactions.inc({ tier: event.tier, outcome: event.outcome });
    this.#compactionTokens.observe({ stage: 'before' }, event.tokensBefore);
    this.#compactionTokens.observe({ stage: 'after' }, event.tokensAfter);
  }

  summary(event: SummaryEvent): void {
    this.#summarySeconds.observe({ outcome: event.outcome }, event.milliseconds / 1000);
    this.#summaryCalls.inc(event.calls);
  }

  epochLookup(hit: boolean): void {
    this.#epochLookups.inc({ result: hit ? 'hit' : 'miss' });
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
