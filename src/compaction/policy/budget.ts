import type { AnswerReservation } from '../../errors.js';
import type { OutputLimit } from '../../transcript/request-view.js';

/**
 * The budget of one request (DESIGN.md § Vocabulary): what the window leaves
 * once the answer's room is reserved. Thresholds are fractions of `tokens`.
 */

export interface Budget {
  /** The context the upstream serves per slot; null when it is unknown (only `max_messages` can trigger then). */
  readonly window: number | null;
  /** Tokens kept for the answer, and where that number came from (the 400 names it). */
  readonly reserve: AnswerReservation;
  /** `window − reserve`, or null without a window. */
  readonly tokens: number | null;
  /** What a summary may cost: `summary.max_tokens`, but never more than {@link MAX_SUMMARY_SHARE} of the window. */
  readonly summaryTokens: number;
}

/**
 * The most of the window kept for the answer. A request's `max_tokens` is a
 * ceiling, not a promise to fill it: agents send 8,000–32,000 whatever the
 * window, and llama-server stops an answer at the window. On a small slot
 * (`-c 8192 -np 4`: 2,048 tokens) the default 1,024 would be half of it, so
 * `reserve_output_tokens` is capped the same way.
 */
const MAX_RESERVE_SHARE = 0.25;

/**
 * The most of the window a summary's notes are planned at: 1,024 notes on a
 * 2,048-token slot left nothing for the turns they stand for (an eighth: 256
 * there, and the configured 1,024 from an 8k window up).
 */
export const MAX_SUMMARY_SHARE = 0.125;

/**
 * The room kept for the answer: `reserve_output_tokens`, or the request's
 * own limit (`max_tokens`, `max_completion_tokens`, `max_output_tokens`,
 * whichever its API has) when larger, but never more than a quarter of the
 * window.
 *
 * @example
 * answerReservation({ tokens: 32000, field: 'max_tokens' }, 1024, 32768) // → { tokens: 8192, source: 'max_tokens', requested: 32000 }
 * answerReservation(undefined, 1024, 2048)                              // → { tokens: 512, source: 'reserve_output_tokens', requested: 1024 }
 */
export function answerReservation(limit: OutputLimit | undefined, configured: number, window: number | null): AnswerReservation {
  const requested = limit?.tokens ?? 0;
  const source = limit === undefined || requested <= configured ? 'reserve_output_tokens' : limit.field;
  const wanted = Math.max(requested, configured);
  const cap = window === null ? Number.POSITIVE_INFINITY : Math.floor(window * MAX_RESERVE_SHARE);
  return wanted > cap ? { tokens: cap, source, requested: wanted } : { tokens: wanted, source };
}

/**
 * The budget of a request: the window less the {@link answerReservation},
 * and what a summary may cost in it.
 *
 * @example
 * budgetOf(8192, { tokens: 2048, field: 'max_tokens' }, 1024, 1024) // → { window: 8192, reserve: { tokens: 2048, source: 'max_tokens' }, tokens: 6144, summaryTokens: 1024 }
 */
export function budgetOf(window: number | null, limit: OutputLimit | undefined, configuredReserve: number, summaryMaxTokens: number): Budget {
  const reserve = answerReservation(limit, configuredReserve, window);
  const summaryTokens = window === null ? summaryMaxTokens : Math.min(summaryMaxTokens, Math.floor(window * MAX_SUMMARY_SHARE));
  return { window, reserve, tokens: window === null ? null : Math.max(0, window - reserve.tokens), summaryTokens };
}
