import type { ChatMessage } from './message.js';

/**
 * A request as the compaction engine reads it, whatever wire format it came
 * in (src/formats/ reads each into this): the engine never reads a wire
 * format's field names off an untyped body, so the same conversation gets
 * the same budget through every route.
 */

/**
 * The field a client limits its answer with, in its own API's words
 * (`max_tokens`, `max_completion_tokens`, `max_output_tokens`: each wire
 * format names its own, WireFormat.outputLimitFields); the 400 that names it
 * advises lowering it.
 */
export type OutputLimitField = string;

/** The most tokens the client lets the answer take, and the field that said so. */
export interface OutputLimit {
  readonly tokens: number;
  readonly field: OutputLimitField;
}

export interface RequestView {
  readonly model: string;
  /** The history in chat form (after pair handling). */
  readonly messages: ChatMessage[];
  /**
   * The tools in chat completions form, as a summary request carries them
   * (they render at the start of the prompt): a list, or whatever a chat
   * client sent there, counted as it came.
   */
  readonly tools: unknown;
  /** The client's limit on the answer; undefined when it set none. */
  readonly maxOutputTokens: OutputLimit | undefined;
  /**
   * The request in chat completions form: what compactor's own calls for it
   * (the summary, an exact count) are built from, so they render the same
   * prompt (same tools, same template fields). The engine copies it into
   * those calls and never reads the client's answer settings from it.
   */
  readonly chatBody: Readonly<Record<string, unknown>>;
}

function positiveNumber(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : 0;
}

/**
 * The larger of the limits a body sets in `fields` (the first one named on a
 * tie), or undefined when none is a positive number.
 *
 * @example
 * outputLimitOf({ max_tokens: 100, max_completion_tokens: 200 }, ['max_tokens', 'max_completion_tokens']) // → { tokens: 200, field: 'max_completion_tokens' }
 */
export function outputLimitOf(body: Readonly<Record<string, unknown>>, fields: readonly OutputLimitField[]): OutputLimit | undefined {
  let limit: OutputLimit | undefined;
  for (const field of fields) {
    const tokens = positiveNumber(body[field]);
    if (tokens > 0 && (limit === undefined || tokens > limit.tokens)) limit = { tokens, field };
  }
  return limit;
}
