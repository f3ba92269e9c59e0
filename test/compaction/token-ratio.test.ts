import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import { INITIAL_TOKEN_RATIO, TokenRatios } from '../../src/compaction/sizes/token-ratio.js';
import { propertyParameters } from '../transcript/arbitraries.js';

describe('TokenRatios', () => {
  it('starts at 1.25 for every model, with no measure', () => {
    const ratios = new TokenRatios();
    expect(INITIAL_TOKEN_RATIO).toBe(1.25);
    expect(ratios.get('qwen', '')).toBe(1.25);
    expect(ratios.size).toBe(0);
  });

  it('replaces the initial guess with the first measure', () => {
    const ratios = new TokenRatios();
    ratios.learn('qwen', '', 1500, 1000);
    expect(ratios.get('qwen', '')).toBe(1.5);
    expect(ratios.size).toBe(1);
    expect(ratios.get('gemma', '')).toBe(1.25);
  });

  it('remembers 1024 (tenant, model) pairs at most, the least recently used forgotten first (model names come from requests)', () => {
    const ratios = new TokenRatios();
    ratios.learn('qwen', '', 1500, 1000);
    for (let index = 0; index < 2_000; index++) {
      ratios.learn(`invented-${index}`, '', 2000, 1000);
      // The model in use stays: every request reads its ratio.
      expect(ratios.get('qwen', '')).toBe(1.5);
    }
    expect(ratios.size).toBe(1024);
    expect(ratios.get('invented-1999', '')).toBe(2);
    expect(ratios.get('invented-0', '')).toBe(INITIAL_TOKEN_RATIO);
  });

  it('item 3: keeps one ratio per tenant and model, each starting from the prior', () => {
    const ratios = new TokenRatios();
    for (let request = 0; request < 4; request++) ratios.learn('qwen', 'mallory', 100_000, 1000);
    expect(ratios.get('qwen', 'mallory')).toBe(4);
    expect(ratios.get('qwen', 'alice')).toBe(INITIAL_TOKEN_RATIO);
    expect(ratios.get('qwen', '')).toBe(INITIAL_TOKEN_RATIO);
    ratios.learn('qwen', 'alice', 1100, 1000);
    expect(ratios.get('qwen', 'alice')).toBe(1.1);
    expect(ratios.get('gemma', 'alice')).toBe(INITIAL_TOKEN_RATIO);
  });

  it('then moves towards each new measure by its weight (0.3)', () => {
    const ratios = new TokenRatios();
    ratios.learn('qwen', '', 1000, 1000); // 1
    ratios.learn('qwen', '', 2000, 1000); // 1 + 0.3 × (2 − 1)
    expect(ratios.get('qwen', '')).toBeCloseTo(1.3, 10);
    ratios.learn('qwen', '', 1000, 1000); // 1.3 + 0.3 × (1 − 1.3)
    expect(ratios.get('qwen', '')).toBeCloseTo(1.21, 10);
  });

  it('ignores measures of small estimates (under 64 tokens) and non-positive counts', () => {
    const ratios = new TokenRatios();
    ratios.learn('qwen', '', 200, 63);
    ratios.learn('qwen', '', 0, 1000);
    ratios.learn('qwen', '', -5, 1000);
    ratios.learn('qwen', '', Number.NaN, 1000);
    ratios.learn('qwen', '', 100, Number.NaN);
    expect(ratios.size).toBe(0);
    expect(ratios.get('qwen', '')).toBe(1.25);
    ratios.learn('qwen', '', 128, 64);
    expect(ratios.get('qwen', '')).toBe(2);
  });

  it('clamps a measure to [0.5, 4]', () => {
    const low = new TokenRatios();
    low.learn('m', '', 1, 1000);
    expect(low.get('m', '')).toBe(0.5);
    const high = new TokenRatios();
    high.learn('m', '', 100_000, 1000);
    expect(high.get('m', '')).toBe(4);
    high.learn('m', '', 100_000, 1000);
    expect(high.get('m', '')).toBe(4);
  });

  it('property: the ratio stays in [0.5, 4] and between the previous ratio and the clamped measure', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ real: fc.integer({ min: -10, max: 1_000_000 }), estimate: fc.integer({ min: 0, max: 200_000 }) }), { maxLength: 20 }),
        (measures) => {
          const ratios = new TokenRatios();
          for (const { real, estimate } of measures) {
            const before = ratios.get('m', '');
            const hadMeasure = ratios.size > 0;
            ratios.learn('m', '', real, estimate);
            const after = ratios.get('m', '');
            expect(after).toBeGreaterThanOrEqual(0.5);
            expect(after).toBeLessThanOrEqual(4);
            if (estimate < 64 || real <= 0) {
              expect(after).toBe(before);
              continue;
            }
            const sample = Math.min(4, Math.max(0.5, real / estimate));
            if (!hadMeasure) expect(after).toBe(sample);
            else {
              expect(after).toBeGreaterThanOrEqual(Math.min(before, sample) - 1e-12);
              expect(after).toBeLessThanOrEqual(Math.max(before, sample) + 1e-12);
            }
          }
        },
      ),
      propertyParameters,
    );
  });
});

describe('TokenRatios shared between replicas (issue 15, item 1)', () => {
  it('keeps measures for a shared store only when it has one, and adopts the shared ratio with its own measures since replayed', () => {
    const alone = new TokenRatios();
    alone.learn('m', 't', 2_000, 1_000);
    expect(alone.hasUnshared).toBe(false);
    const ratios = new TokenRatios({ shared: true });
    ratios.learn('m', 't', 2_000, 1_000);
    expect(ratios.takeUnshared()).toEqual([{ tenant: 't', model: 'm', samples: [2] }]);
    expect(ratios.hasUnshared).toBe(false);
    ratios.learn('m', 't', 1_000, 1_000);
    // Another replica's measures made the shared ratio 3; this replica's measure of 1 is not shared yet: 3 + 0.3 × (1 - 3).
    ratios.adopt('m', 't', 3);
    expect(ratios.get('m', 't')).toBeCloseTo(2.4, 10);
    // A value out of any tokenizer's range is not taken.
    ratios.adopt('m', 't', 40);
    expect(ratios.get('m', 't')).toBeCloseTo(2.4, 10);
  });
});
