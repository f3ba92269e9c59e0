import type { AnswerReservation } from '../errors.js';

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
}

function positiveNumber(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : 0;
}

/**
 * A request's `max_tokens` is a ceiling, not a promise to fill it: agents send
 * 8,000–32,000 whatever the window, and llama-server stops an answer at the
 * window. So a request's number never reserves more than this share of it.
 */
const MAX_REQUESTED_RESERVE_SHARE = 0.25;

/**
 * The room kept for the answer: `reserve_output_tokens`, or the request's
 * `max_tokens` / `max_completion_tokens` when larger, but a request's number
 * never counts for more than a quarter of the window. A configured reserve
 * above the quarter is kept: the operator asked for it.
 *
 * @example
 * answerReservation({ max_tokens: 32000 }, 1024, 32768) // → { tokens: 8192, source: 'max_tokens', requested: 32000 }
 */
export function answerReservation(body: Readonly<Record<string, unknown>>, configured: number, window: number | null): AnswerReservation {
  const maxTokens = positiveNumber(body['max_tokens']);
  const maxCompletionTokens = positiveNumber(body['max_completion_tokens']);
  const source = maxCompletionTokens > maxTokens ? 'max_completion_tokens' : 'max_tokens';
  const requested = Math.max(maxTokens, maxCompletionTokens);
  const cap = window === null ? Number.POSITIVE_INFINITY : Math.floor(window * MAX_REQUESTED_RESERVE_SHARE);
  const allowed = Math.min(requested, cap);
  if (allowed <= configured) return { tokens: configured, source: 'reserve_output_tokens' };
  return requested > cap ? { tokens: allowed, source, requested } : { tokens: allowed, source };
}

/**
 * The budget of a request: the window less the {@link answerReservation}.
 *
 * @example
 * budgetOf(8192, { max_tokens: 2048 }, 1024) // → { window: 8192, reserve: { tokens: 2048, source: 'max_tokens' }, tokens: 6144 }
 */
export function budgetOf(window: number | null, body: Readonly<Record<string, unknown>>, configuredReserve: number): Budget {
  const reserve = answerReservation(body, configuredReserve, window);
  return { window, reserve, tokens: window === null ? null : Math.max(0, window - reserve.tokens) };
}
