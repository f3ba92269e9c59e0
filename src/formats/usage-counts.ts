import type { Usage } from '../upstream/usage.js';

/**
 * A format's usage object in chat completions' words, for an API that names
 * its counts otherwise (the Messages and Responses APIs' `input_tokens` and
 * `output_tokens`): the prompt is the sum of `prompt` fields, the first of
 * them required (a Messages `message_delta` usage without `input_tokens`
 * says nothing about the prompt: undefined), the answer is `completion`.
 *
 * @example
 * usageCounted({ input_tokens: 120, cache_read_input_tokens: 30, output_tokens: 9 }, ['input_tokens', 'cache_read_input_tokens'], 'output_tokens')
 * // → { prompt_tokens: 150, completion_tokens: 9 }
 */
export function usageCounted(value: unknown, prompt: readonly [string, ...string[]], completion: string): Usage | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const usage = value as Record<string, unknown>;
  const [first, ...rest] = prompt;
  const input = usage[first];
  if (typeof input !== 'number') return undefined;
  const count = (key: string): number => (typeof usage[key] === 'number' ? (usage[key] as number) : 0);
  const output = usage[completion];
  return {
    prompt_tokens: rest.reduce((sum, key) => sum + count(key), input),
    ...(typeof output === 'number' ? { completion_tokens: output } : {}),
  };
}
