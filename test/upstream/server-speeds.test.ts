import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { MAX_SPEED_KEYS, ServerSpeeds, measureOf } from '../../src/upstream/server-speeds.js';
import { extractUsage } from '../../src/upstream/usage.js';
import { CHAT_USAGE } from '../../src/formats/chat/usage.js';

/**
 * Issue 36 item 1: speeds learned per upstream and model from llama-server's
 * `timings` (recorded answers in test/fixtures/llama-server/: a 1,659-token
 * prompt read at 25,075 t/s, then the same prompt with 11 new tokens at 500
 * t/s, its fixed cost showing), else from usage and wall time.
 */

const fixture = (name: string): string => readFileSync(new URL(`../fixtures/llama-server/${name}`, import.meta.url), 'utf8');

/** The answer of a recorded exchange (its JSON body after the `### response body` line). */
function answerOf(name: string): unknown {
  const text = fixture(name);
  const body = text.slice(text.indexOf('{', text.indexOf('### response')));
  return JSON.parse(body);
}

describe('learned server speeds (issue 36)', () => {
  it('reads a recorded answer’s timings', () => {
    const measure = measureOf(extractUsage(answerOf('cache_reuse_2.txt'), CHAT_USAGE));
    expect(measure).toEqual({ prefillTokens: 11, prefillMs: 22.017, decodeTokens: 4, decodeMs: 5.138, cachedTokens: 1656, source: 'timings' });
  });

  it('weighs each answer by its tokens, not one answer one vote', () => {
    const speeds = new ServerSpeeds();
    speeds.observe('http://a', 'm', measureOf(extractUsage(answerOf('cache_reuse_1.txt'), CHAT_USAGE))!);
    speeds.observe('http://a', 'm', measureOf(extractUsage(answerOf('cache_reuse_2.txt'), CHAT_USAGE))!);
    const learned = speeds.speedsOf('http://a', 'm')!;
    // 1,659 + 11 tokens over 66.161·0.9 + 22.017 ms: the long prompt's speed, barely moved by the 11-token one.
    expect(learned.prefill).toBeCloseTo(((1659 * 0.9 + 11) * 1000) / (66.161 * 0.9 + 22.017), 3);
    expect(learned.prefill).toBeGreaterThan(15_000);
    expect(learned.decode).toBeCloseTo(((4 * 0.9 + 4) * 1000) / (6.398 * 0.9 + 5.138), 3);
  });

  it('keeps upstreams and models apart, and stays bounded', () => {
    const speeds = new ServerSpeeds();
    const measure = { prefillTokens: 1000, prefillMs: 200, decodeTokens: 100, decodeMs: 1000, cachedTokens: 0, source: 'timings' as const };
    speeds.observe('http://a', 'm', measure);
    expect(speeds.speedsOf('http://a', 'm')).toEqual({ prefill: 5000, decode: 100 });
    expect(speeds.speedsOf('http://b', 'm')).toBeNull();
    expect(speeds.speedsOf('http://a', 'other')).toBeNull();
    for (let index = 0; index < MAX_SPEED_KEYS + 5; index++) speeds.observe('http://a', `model-${index}`, measure);
    expect(speeds.snapshot()).toHaveLength(MAX_SPEED_KEYS);
    expect(speeds.speedsOf('http://a', 'm')).toBeNull();
  });

  it('falls back on usage and wall time when the server sends no timings', () => {
    const measure = measureOf({ usage: { prompt_tokens: 5000, completion_tokens: 130, prompt_tokens_details: { cached_tokens: 0 } } }, { firstByteMs: 1000, restMs: 1000 });
    expect(measure).toEqual({ prefillTokens: 5000, prefillMs: 1000, decodeTokens: 130, decodeMs: 1000, cachedTokens: 0, source: 'wall' });
    const speeds = new ServerSpeeds();
    speeds.observe('http://a', 'm', measure!);
    expect(speeds.speedsOf('http://a', 'm')).toEqual({ prefill: 5000, decode: 130 });
    // With no wall times either (a JSON answer), its seconds come from the speeds learned.
    const seconds = speeds.secondsOf('http://a', 'm', measureOf({ usage: { prompt_tokens: 2500, completion_tokens: 13 } })!);
    expect(seconds.prefill).toBeCloseTo(0.5);
    expect(seconds.decode).toBeCloseTo(0.1);
    expect(measureOf({})).toBeNull();
  });

  it('learns how long a summary is', () => {
    const speeds = new ServerSpeeds();
    expect(speeds.summaryTokensOf('http://a', 'm')).toBeNull();
    speeds.observe('http://a', 'm', { prefillTokens: 300, prefillMs: 60, decodeTokens: 400, decodeMs: 3000, cachedTokens: 6000, source: 'timings' }, { summary: true });
    speeds.observe('http://a', 'm', { prefillTokens: 300, prefillMs: 60, decodeTokens: 600, decodeMs: 4500, cachedTokens: 6000, source: 'timings' }, { summary: true });
    expect(speeds.summaryTokensOf('http://a', 'm')).toBeCloseTo((400 * 0.9 + 600) / 1.9, 6);
  });
});
