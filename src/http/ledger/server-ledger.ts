import { type AnswerMeasure, type ServerSeconds, type ServerSpeeds, measureOf } from '../../upstream/server-speeds.js';
import { extractUsage } from '../../upstream/usage.js';
import { OWN_CALL_FORMAT } from '../../formats/registry.js';
import type { UsageObservation } from '../exchange/planner.js';
import type { PrefixBreak, PrefixLedger } from './prefix-breaks.js';

/**
 * What the server paid, request by request: each answer's measure teaches
 * the speeds (server-speeds.ts), gives its server seconds (prefill, decode),
 * and its print goes through the prefix-break ledger (prefix-breaks.ts).
 * The metrics and the dashboard are told what came of it. Summary calls are
 * measured on their way back (`measuredChatCall`), as `call="summary"`.
 */

/** Compactor's own causes: the re-processing after them is what its changes cost the server. */
export const COMPACTOR_CAUSES: ReadonlySet<PrefixBreak['cause']> = new Set(['compression', 'summary', 'truncation', 'prune', 'repair']);

export interface LedgerListener {
  upstreamSeconds(call: 'main' | 'summary', seconds: ServerSeconds): void;
  prefixBreaks(breaks: readonly PrefixBreak[]): void;
}

/** What one answered request cost, for the dashboard. */
export interface AnswerCost {
  readonly seconds: ServerSeconds | null;
  readonly breaks: readonly PrefixBreak[];
  /** Seconds the server spent reading again what compactor's own changes broke (at the learned prefill speed). */
  readonly reprocessSeconds: number;
}

export class ServerLedger {
  readonly #upstream: string;
  readonly #speeds: ServerSpeeds;
  readonly #breaks: PrefixLedger;
  readonly #listener: LedgerListener;
  /** Summary seconds in all, for the dashboard's totals. */
  summarySeconds = { prefill: 0, decode: 0, calls: 0 };

  constructor(options: { readonly upstream: string; readonly speeds: ServerSpeeds; readonly breaks: PrefixLedger; readonly listener: LedgerListener }) {
    this.#upstream = options.upstream;
    this.#speeds = options.speeds;
    this.#breaks = options.breaks;
    this.#listener = options.listener;
  }

  /** One answered chat request. */
  answered(observation: UsageObservation): AnswerCost {
    const { request } = observation;
    // On a fleet, each server's speeds are its own (issue 39).
    const upstream = request.upstream ?? this.#upstream;
    const measure = measureOf(observation, observation.streamed ? observation.wall : undefined);
    let seconds: ServerSeconds | null = null;
    if (measure !== null) {
      this.#speeds.observe(upstream, request.model, measure);
      seconds = this.#speeds.secondsOf(upstream, request.model, measure);
      this.#listener.upstreamSeconds('main', seconds);
    }
    if (request.prefix === undefined) return { seconds, breaks: [], reprocessSeconds: 0 };
    const promptTokens = observation.usage?.prompt_tokens ?? (observation.timings?.prompt_n === undefined ? undefined : observation.timings.prompt_n + (observation.timings.cache_n ?? 0));
    const breaks = this.#breaks.observe(request.prefix, { slot: request.slot, promptTokens, cachedTokens: measure?.cachedTokens ?? null, repairs: request.repairs.length });
    if (breaks.length > 0) this.#listener.prefixBreaks(breaks);
    const speed = this.#speeds.speedsOf(upstream, request.model)?.prefill ?? prefillSpeedOf(measure);
    let recomputed = 0;
    for (const broken of breaks) if (COMPACTOR_CAUSES.has(broken.cause)) recomputed += broken.recomputedTokens;
    return { seconds, breaks, reprocessSeconds: speed === null || speed <= 0 ? 0 : recomputed / speed };
  }

  /** One summary call's answer (the parsed completion), on the upstream `upstream` (the summary one, when set). */
  summaryAnswer(upstream: string, model: string, answer: unknown): void {
    const measure = measureOf(extractUsage(answer, OWN_CALL_FORMAT.usage));
    if (measure === null) return;
    this.#speeds.observe(upstream, model, measure, { summary: true });
    const seconds = this.#speeds.secondsOf(upstream, model, measure);
    this.summarySeconds = { prefill: this.summarySeconds.prefill + seconds.prefill, decode: this.summarySeconds.decode + seconds.decode, calls: this.summarySeconds.calls + 1 };
    this.#listener.upstreamSeconds('summary', seconds);
  }
}

function prefillSpeedOf(measure: AnswerMeasure | null): number | null {
  return measure === null || measure.prefillMs === null || measure.prefillMs <= 0 ? null : (measure.prefillTokens * 1000) / measure.prefillMs;
}

/** A summary ChatCall whose answers are measured (`call="summary"`) before the engine reads them. */
export function measuredChatCall<Call extends (body: Record<string, unknown>, ...rest: never[]) => Promise<unknown>>(
  call: Call,
  ledger: ServerLedger,
  upstream: string,
): Call {
  return (async (body: Record<string, unknown>, ...rest: never[]) => {
    const answer = await call(body, ...rest);
    try {
      ledger.summaryAnswer(upstream, typeof body['model'] === 'string' ? body['model'] : '', answer);
    } catch {
      // A measure never fails a summary.
    }
    return answer;
  }) as Call;
}
