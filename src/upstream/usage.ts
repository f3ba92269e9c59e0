import { z } from 'zod';

/**
 * What an answer says it cost: OpenAI's `usage` (the chat completions form
 * every wire format's own usage is read into: src/formats/<name>/usage.ts),
 * and llama-server's `timings` (`cache_n` tokens reused from the KV cache,
 * `prompt_n` read anew).
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
 * Where one wire format's answers say what they cost, and in which words
 * (each format says its own, src/formats/<name>/usage.ts). `timings` is
 * llama-server's own, the same on every route.
 */
export interface UsageWords {
  /** The key of the object that says it, at the top of an answer or of a stream event (`usage` in the APIs served today). */
  readonly key: string;
  /** Objects of a stream's events that hold that key too (Messages' `message_start` holds it in `message`, Responses' `response.completed` in `response`). */
  readonly within: readonly string[];
  /** That object in chat completions' words (the `Usage` compactor reads), or undefined when it says nothing about the prompt. */
  read(value: unknown): Usage | undefined;
}

/**
 * Reads the format's usage and llama-server's `timings` from a completion
 * or a stream chunk, when they are there and well-formed.
 *
 * @example
 * extractUsage({ usage: { prompt_tokens: 25 }, timings: { cache_n: 24, prompt_n: 1 } }, chatWords)
 * // → { usage: { prompt_tokens: 25 }, timings: { cache_n: 24, prompt_n: 1 } }
 */
export function extractUsage(value: unknown, words: UsageWords): UsageFound {
  if (typeof value !== 'object' || value === null) return {};
  const found: UsageFound = {};
  const usage = words.key in value ? words.read((value as Record<string, unknown>)[words.key]) : undefined;
  if (usage !== undefined) found.usage = usage;
  for (const key of words.within) {
    if (found.usage !== undefined || !(key in value)) continue;
    const inner = (value as Record<string, unknown>)[key];
    if (typeof inner === 'object' && inner !== null && words.key in inner) {
      const innerUsage = words.read((inner as Record<string, unknown>)[words.key]);
      if (innerUsage !== undefined) found.usage = innerUsage;
    }
  }
  if ('timings' in value) {
    if (isTimings(value.timings)) found.timings = value.timings;
  }
  return found;
}
