import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TimingsSchema, UsageSchema, extractUsage, isTimings, isUsage } from '../../src/upstream/usage.js';
import { formatAt } from '../support/formats.js';

const CHAT_USAGE = formatAt('/v1/chat/completions').usage;

// The figures are checked by hand (zod copied every answer's usage, issue 26): the checks must say what the schemas say.

const field = fc.oneof(fc.constant(undefined), fc.constant(null), fc.integer(), fc.double(), fc.string(), fc.constant([]), fc.constant({}), fc.constant(Number.NaN));
const usageLike = fc.record(
  {
    prompt_tokens: field,
    completion_tokens: field,
    total_tokens: field,
    prompt_tokens_details: fc.oneof(field, fc.record({ cached_tokens: field }, { requiredKeys: [] })),
    other: field,
  },
  { requiredKeys: [] },
);
const timingsLike = fc.record({ cache_n: field, prompt_n: field, prompt_ms: field, predicted_n: field, predicted_ms: field, other: field }, { requiredKeys: [] });

describe('usage figures checked by hand', () => {
  it('isUsage accepts exactly what UsageSchema accepts', () => {
    fc.assert(fc.property(fc.oneof(usageLike, field), (value) => {
        expect(isUsage(value)).toBe(UsageSchema.safeParse(value).success);
      }), { numRuns: 2000 });
  });

  it('isTimings accepts exactly what TimingsSchema accepts', () => {
    fc.assert(fc.property(fc.oneof(timingsLike, field), (value) => {
        expect(isTimings(value)).toBe(TimingsSchema.safeParse(value).success);
      }), { numRuns: 2000 });
  });

  it('extractUsage gives the figures as they came', () => {
    const answer = { usage: { prompt_tokens: 25, completion_tokens: 9, prompt_tokens_details: { cached_tokens: 20 } }, timings: { cache_n: 24, prompt_n: 1 } };
    expect(extractUsage(answer, CHAT_USAGE)).toEqual(answer);
    expect(extractUsage({ usage: { prompt_tokens: '25' }, timings: { cache_n: 'x' } }, CHAT_USAGE)).toEqual({});
  });
});
