import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import {
  formatTokens,
  prunedLine,
  reusedLine,
  summarizedLine,
  truncatedLine,
  withCompressed,
  wouldSummarizeLine,
} from '../../src/compaction/policy/report.js';
import { propertyParameters } from '../transcript/arbitraries.js';

const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

describe('formatTokens', () => {
  it('writes thousands with one decimal and a k, smaller counts as whole numbers', () => {
    expect(formatTokens(61_234)).toBe('61.2k');
    expect(formatTokens(950)).toBe('950');
    expect(formatTokens(0)).toBe('0');
    expect(formatTokens(999)).toBe('999');
    expect(formatTokens(1000)).toBe('1.0k');
    expect(formatTokens(9_100)).toBe('9.1k');
    expect(formatTokens(123_456)).toBe('123.5k');
  });

  it('rounds fractional estimates (a learned ratio makes them) first', () => {
    expect(formatTokens(949.6)).toBe('950');
    expect(formatTokens(999.6)).toBe('1.0k');
    expect(formatTokens(12.4)).toBe('12');
  });
});

describe('report lines', () => {
  it('summarized: the words of DESIGN § Observability', () => {
    expect(summarizedLine({ old: 84, kept: 12, before: 61_234, after: 9_100, milliseconds: 3_400 })).toBe(
      'summarized 84 messages -> 1 summary + 12 kept (61.2k -> 9.1k tokens, 3.4s)',
    );
    expect(summarizedLine({ old: 1, kept: 1, before: 900, after: 300, milliseconds: 49 })).toBe(
      'summarized 1 message -> 1 summary + 1 kept (900 -> 300 tokens, 0.0s)',
    );
  });

  it('pruned, truncated and reused', () => {
    expect(prunedLine({ results: 3, before: 61_234, after: 9_300 })).toBe('pruned 3 tool results (61.2k -> 9.3k tokens)');
    expect(prunedLine({ results: 1, before: 2000, after: 1000 })).toBe('pruned 1 tool result (2.0k -> 1.0k tokens)');
    expect(truncatedLine({ dropped: 40, kept: 8, before: 61_234, after: 9_300, reason: 'the summary timed out' })).toBe(
      'truncated 40 messages -> notice + 8 kept (61.2k -> 9.3k tokens; the summary timed out)',
    );
    expect(reusedLine({ before: 61_234, after: 9_300 })).toBe('epoch reused (61.2k -> 9.3k tokens)');
  });

  it('a summary that compressed what it keeps says both, the compression first; observe mode would say both', () => {
    const compressed = { results: 3, before: 2812, after: 434 };
    const summary = summarizedLine({ old: 200, kept: 27, before: 55_500, after: 4600, milliseconds: 1200 });
    expect(withCompressed(summary, compressed)).toBe('compressed 3 tool results (2.8k -> 434 tokens), summarized 200 messages -> 1 summary + 27 kept (55.5k -> 4.6k tokens, 1.2s)');
    expect(withCompressed(summary, undefined)).toBe(summary);
    expect(wouldSummarizeLine({ tier: 'summary', old: 200, kept: 27, before: 55_500, after: 4600, compressed })).toBe(
      'would compress 3 tool results (2.8k -> 434 tokens), summarize 200 messages -> 1 summary + 27 kept (55.5k -> 4.6k tokens)',
    );
  });

  it('property: every line is printable ASCII (no arrow characters)', () => {
    const count = fc.nat({ max: 100_000 });
    const tokens = fc.double({ min: 0, max: 1e7, noNaN: true });
    fc.assert(
      fc.property(count, count, tokens, tokens, fc.nat({ max: 10_000_000 }), (old, kept, before, after, milliseconds) => {
        for (const line of [
          summarizedLine({ old, kept, before, after, milliseconds }),
          prunedLine({ results: old, before, after }),
          truncatedLine({ dropped: old, kept, before, after, reason: 'the summary failed' }),
          reusedLine({ before, after }),
        ]) {
          expect(line).toMatch(PRINTABLE_ASCII);
          expect(line).toContain(' -> ');
        }
      }),
      propertyParameters,
    );
  });
});
