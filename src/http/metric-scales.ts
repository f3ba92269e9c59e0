import { Registry, collectDefaultMetrics } from 'prom-client';
import type { CompactionEvent } from '../compaction/ports.js';

/** What the metrics (metrics.ts) are measured in: histogram buckets, the bounded model label, the engine's words as labels, the process registry. */

/** Time to the upstream's response headers: loopback JSON calls take milliseconds, a local model reading a long prompt minutes. */
export const UPSTREAM_SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/** Summaries are model calls that write up to `summary.max_tokens`: seconds to minutes. */
export const SUMMARY_SECONDS_BUCKETS = [0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300];

/** Prompt sizes from a small chat to the largest windows served (1k to 1M tokens, doubling). */
export const TOKEN_BUCKETS = Array.from({ length: 11 }, (_, index) => 1024 * 2 ** index);

/** A whole request, start to last byte: from an ops probe's milliseconds to a long answer streamed for many minutes. */
export const REQUEST_SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800];

/**
 * Models named in labels; later names count as {@link OTHER_MODEL}. The name
 * comes from the client, so without a bound a client could grow the scrape
 * without end; 64 is more models than one server (or a router in front of a
 * few) serves, and keeps the compactions family, the widest (5 tiers × 7
 * outcomes), to at most some 2,300 series.
 */
const MAX_MODEL_LABELS = 64;
const OTHER_MODEL = 'other';

/** The label of a model: its name for the first {@link MAX_MODEL_LABELS} seen, then "other". */
export class ModelLabels {
  readonly #seen = new Set<string>();
  readonly #limit: number;

  constructor(limit = MAX_MODEL_LABELS) {
    this.#limit = limit;
  }

  of(model: string): string {
    if (this.#seen.has(model)) return model;
    if (this.#seen.size >= this.#limit) return OTHER_MODEL;
    this.#seen.add(model);
    return model;
  }
}

/**
 * The engine's words as metric labels. The labels were published before the
 * engine's words settled (README.md § Metrics), so two differ: no tier is
 * `none`, and `too-large` is `too_large`.
 */
export function compactionLabels(event: CompactionEvent): { tier: string; outcome: string } {
  return { tier: event.tier ?? 'none', outcome: event.outcome === 'too-large' ? 'too_large' : event.outcome };
}

/** Outcomes that made an epoch: the only ones whose size after is the size of something forwarded. */
export const MADE_AN_EPOCH: ReadonlySet<CompactionEvent['outcome']> = new Set(['compacted', 'prepared', 'truncated']);

let processRegistry: Registry | undefined;

/** The process metrics, collected once per process whatever the number of apps. */
export function processMetrics(): Registry {
  if (processRegistry === undefined) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}
