import type { UsageHook, UsageObservation } from './planner.js';
import type { PromptTokens } from '../ops/metrics.js';

/**
 * The prompt tokens of one answered chat request, from what the upstream
 * reported: `usage.prompt_tokens`, else llama-server's `timings`
 * (`prompt_n + cache_n`, which a stream carries even without
 * `stream_options.include_usage`); null when it reported neither.
 *
 * Only the forwarded prompt was counted by the upstream. When compaction (or
 * a pair repair) changed it, the client's history is taken to be as much
 * larger as the bytes/4 estimates of the two say: the learned ratio of real
 * tokens to the estimate applies to both alike.
 *
 * @example
 * promptTokensOf({ context: { body }, forwarded: body, usage: { prompt_tokens: 25 }, timings: { cache_n: 24, prompt_n: 1 } })
 * // → { model: body.model, sent: 25, forwarded: 25, cached: 24 }
 */
export function promptTokensOf(observation: Pick<UsageObservation, 'request' | 'usage' | 'timings' | 'clientTokens'>): PromptTokens | null {
  const { usage, timings, request } = observation;
  const forwarded = usage?.prompt_tokens ?? (timings?.prompt_n === undefined ? undefined : timings.prompt_n + (timings.cache_n ?? 0));
  if (forwarded === undefined) return null;
  const cached = timings?.cache_n ?? usage?.prompt_tokens_details?.cached_tokens ?? 0;
  const model = request.model;
  // The header said how large the client's history was: that one number is counted everywhere.
  if (observation.clientTokens !== undefined) return { model, sent: Math.round(observation.clientTokens), forwarded, cached };
  // The estimates were made when the request was forwarded (RequestFigures): no body is kept until here.
  const { estimates } = request;
  if (!request.changed || estimates === undefined) return { model, sent: forwarded, forwarded, cached };
  return { model, sent: Math.round((forwarded * estimates.client) / Math.max(1, estimates.forwarded)), forwarded, cached };
}

/**
 * The app's usage hook (if any), then the prompt-token counters, then `andThen`
 * (the dashboard) with the same figures, for every answered chat request: the
 * estimates behind them are made once per request, not once per reader.
 */
export function withPromptTokens(
  onUsage: UsageHook | undefined,
  metrics: { promptTokens(tokens: PromptTokens): void },
  andThen?: (observation: UsageObservation, tokens: PromptTokens | null) => void,
): UsageHook {
  return (observation) => {
    onUsage?.(observation);
    const tokens = promptTokensOf(observation);
    if (tokens !== null) metrics.promptTokens(tokens);
    andThen?.(observation, tokens);
  };
}
