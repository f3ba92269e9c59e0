/**
 * The budget of one request (DESIGN.md § Vocabulary): what the window leaves
 * once the answer's room is reserved. Thresholds are fractions of `tokens`.
 */

export interface Budget {
  /** The context the upstream serves per slot; null when it is unknown (only `max_messages` can trigger then). */
  readonly window: number | null;
  /** Tokens kept for the answer. */
  readonly reserve: number;
  /** `window − reserve`, or null without a window. */
  readonly tokens: number | null;
}

function positiveNumber(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : 0;
}

/**
 * The budget of a request: the reserve is the model's `reserve_output_tokens`,
 * or the request's `max_tokens` / `max_completion_tokens` when larger.
 *
 * @example
 * budgetOf(8192, { max_tokens: 2048 }, 1024) // → { window: 8192, reserve: 2048, tokens: 6144 }
 */
export function budgetOf(window: number | null, body: Readonly<Record<string, unknown>>, configuredReserve: number): Budget {
  const reserve = Math.max(positiveNumber(body['max_tokens']), positiveNumber(body['max_completion_tokens']), configuredReserve);
  return { window, reserve, tokens: window === null ? null : Math.max(0, window - reserve) };
}
