import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import { isHighSurrogate, isLowSurrogate, safeCutIndex, splitsSurrogatePair } from '../../src/transcript/text.js';
import { hasLoneSurrogate, propertyParameters } from './arbitraries.js';

describe('isHighSurrogate / isLowSurrogate', () => {
  it('tells the two halves of a pair apart, and neither from other code units', () => {
    const emoji = '😀';
    expect(isHighSurrogate(emoji.charCodeAt(0))).toBe(true);
    expect(isLowSurrogate(emoji.charCodeAt(0))).toBe(false);
    expect(isLowSurrogate(emoji.charCodeAt(1))).toBe(true);
    expect(isHighSurrogate(emoji.charCodeAt(1))).toBe(false);
    for (const code of [0x41, 0xd7ff, 0xe000, 0xfeff]) {
      expect(isHighSurrogate(code)).toBe(false);
      expect(isLowSurrogate(code)).toBe(false);
    }
    expect([0xd800, 0xdbff].map(isHighSurrogate)).toEqual([true, true]);
    expect([0xdc00, 0xdfff].map(isLowSurrogate)).toEqual([true, true]);
  });
});

describe('splitsSurrogatePair', () => {
  it('is true only between the halves of a pair (the @example)', () => {
    expect(splitsSurrogatePair('a😀b', 2)).toBe(true);
    expect(splitsSurrogatePair('a😀b', 1)).toBe(false);
    expect(splitsSurrogatePair('a😀b', 3)).toBe(false);
  });

  it('is false at either end of the text and next to a lone surrogate', () => {
    expect(splitsSurrogatePair('😀', 0)).toBe(false);
    expect(splitsSurrogatePair('😀', 2)).toBe(false);
    expect(splitsSurrogatePair('a\ud800b', 2)).toBe(false);
    expect(splitsSurrogatePair('a\udc00b', 1)).toBe(false);
  });
});

describe('safeCutIndex', () => {
  it('moves a cut inside a pair one back, and leaves every other cut (the @example)', () => {
    expect(safeCutIndex('a😀b', 2)).toBe(1);
    expect(safeCutIndex('a😀b', 3)).toBe(3);
    expect(safeCutIndex('a😀b', 0)).toBe(0);
    expect(safeCutIndex('a😀b', 4)).toBe(4);
  });

  it('property: the head it leaves is at most the index long, at least one shorter, and holds no half pair', () => {
    const textArbitrary = fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 40 }),
      fc.string({ unit: fc.constantFrom('a', '日', '😀', '𝄞'), maxLength: 40 }),
    );
    fc.assert(
      fc.property(
        textArbitrary.chain((text) => fc.tuple(fc.constant(text), fc.integer({ min: 0, max: text.length }))),
        ([text, index]) => {
          const cut = safeCutIndex(text, index);
          expect(cut).toBeLessThanOrEqual(index);
          expect(cut).toBeGreaterThanOrEqual(Math.max(0, index - 1));
          expect(hasLoneSurrogate(text.slice(0, cut))).toBe(false);
          expect(hasLoneSurrogate(text.slice(cut))).toBe(false);
        },
      ),
      propertyParameters,
    );
  });
});
