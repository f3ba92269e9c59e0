import { z } from 'zod';

/**
 * What an answer says it cost: OpenAI's `usage`, and llama-server's
 * `timings` (`cache_n` tokens reused from the KV cache, `prompt_n` read anew).
 * Loose schemas: other fields pass through, a missing field is not an error.
 */

export const UsageSchema = z.looseObject({
  prompt_tokens: z.number(),
  completion_tokens: z.number().optional(),
  total_tokens: z.number().optional(),
  prompt_tokens_details: z.looseObject({ cached_tokens: z.number().optional() }).nullable().optional(),
});
export type Usage = z.infer<typeof UsageSchema>;

export const TimingsSchema = z.looseObject({
  cache_n: z.number().optional(),
  prompt_n: z.number().optional(),
  prompt_ms: z.number().optional(),
  predicted_n: z.number().optional(),
  predicted_ms: z.number().optional(),
});
export type Timings = z.infer<typeof TimingsSchema>;

// Checked by hand, as the schemas say: every answer carries them, and zod copies each object it accepts (~1% of a request's CPU).
const isCount = (value: unknown): boolean => typeof value === 'number' && Number.isFinite(value);
const isOptionalCount = (value: unknown): boolean => value === undefined || isCount(value);

/** Whether `value` passes {@link UsageSchema}. */
export function isUsage(value: unknown): value is Usage {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const usage = value as Record<string, unknown>;
  if (!isCount(usage['prompt_tokens']) || !isOptionalCount(usage['completion_tokens']) || !isOptionalCount(usage['total_tokens'])) return false;
  const details = usage['prompt_tokens_details'];
  if (details === undefined || details === null) return true;
  return typeof details === 'object' && !Array.isArray(details) && isOptionalCount((details as Record<string, unknown>)['cached_tokens']);
}

/** Whether `value` passes {@link TimingsSchema}. */
export function isTimings(value: unknown): value is Timings {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const timings = value as Record<string, unknown>;
  return ['cache_n', 'prompt_n', 'prompt_ms', 'predicted_n', 'predicted_ms'].every((key) => isOptionalCount(timings[key]));
}

export interface UsageFound {
  usage?: Usage;
  timings?: Timings;
}

/**
 * Reads `usage` and `timings` from a completion or a stream chunk, when they
 * are there and well-formed.
 *
 * @example
 * extractUsage({ usage: { prompt_tokens: 25 }, timings: { cache_n: 24, prompt_n: 1 } })
 * // → { usage: { prompt_tokens: 25 }, timings: { cache_n: 24, prompt_n: 1 } }
 */
export function extractUsage(value: unknown): UsageFound {
  if (typeof value !== 'object' || value === null) return {};
  const found: UsageFound = {};
  if ('usage' in value) {
    if (isUsage(value.usage)) found.usage = value.usage;
    else {
      const other = usageOfOtherApis(value.usage);
      if (other !== undefined) found.usage = other;
    }
  }
  // Messages API: `message_start` holds it in `message`; Responses API: `response.completed` in `response`.
  for (const key of ['message', 'response'] as const) {
    if (found.usage !== undefined || !(key in value)) continue;
    const inner = (value as Record<string, unknown>)[key];
    if (typeof inner === 'object' && inner !== null && 'usage' in inner) {
      const other = usageOfOtherApis(inner.usage);
      if (other !== undefined) found.usage = other;
    }
  }
  if ('timings' in value) {
    if (isTimings(value.timings)) found.timings = value.timings;
  }
  return found;
}

/**
 * The Anthropic Messages API's and the OpenAI Responses API's usage in chat
 * terms: `input_tokens` (plus Anthropic's cache reads and writes, which it
 * counts apart) is the prompt. A `message_delta` usage without
 * `input_tokens` says nothing about the prompt: undefined.
 */
function usageOfOtherApis(value: unknown): Usage | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const usage = value as Record<string, unknown>;
  const input = usage['input_tokens'];
  if (typeof input !== 'number') return undefined;
  const count = (key: string): number => (typeof usage[key] === 'number' ? (usage[key] as number) : 0);
  const output = usage['output_tokens'];
  return {
    prompt_tokens: input + count('cache_read_input_tokens') + count('cache_creation_input_tokens'),
    ...(typeof output === 'number' ? { completion_tokens: output } : {}),
  };
}
