import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import { estimateMessageTokens, estimateTokens } from '../../../src/transcript/tokens.js';
import { chunkTranscript } from '../../../src/compaction/summary/chunks.js';
import { hasLoneSurrogate, propertyParameters } from '../../transcript/arbitraries.js';

/** The measure of the heuristic: ⌊UTF-8 bytes / 4⌋. */
const bytesOver4 = (text: string): number => estimateTokens(text);
/** The measure summarize() uses: a user message with its framing, times a ratio. */
const asMessage = (text: string): number => estimateMessageTokens({ role: 'user', content: text }) * 1.25;

describe('chunkTranscript', () => {
  it('packs messages into chunks at message boundaries, joined by a blank line', () => {
    const rendered = ['[user] aaaa', '[assistant] bbbb', '[user] cccc'];
    expect(chunkTranscript(rendered, 1000, bytesOver4)).toEqual([rendered.join('\n\n')]);
    // 11 + 2 + 16 bytes = 29 bytes = 7 tokens: two fit a chunk of 7, three do not.
    expect(chunkTranscript(rendered, 7, bytesOver4)).toEqual([`${rendered[0]}\n\n${rendered[1]}`, rendered[2]]);
    expect(chunkTranscript([], 10, bytesOver4)).toEqual([]);
  });

  it('splits a message larger than a chunk, each piece within the chunk', () => {
    const text = 'x'.repeat(1000);
    const chunks = chunkTranscript(['[user] hi', text, '[user] bye'], 100, bytesOver4);
    expect(chunks[0]).toBe('[user] hi');
    expect(chunks.at(-1)).toBe('[user] bye');
    expect(chunks.slice(1, -1).join('')).toBe(text);
    for (const chunk of chunks) expect(bytesOver4(chunk)).toBeLessThanOrEqual(100);
  });

  it('keeps every piece of a mixed-width message within the chunk (ASCII then CJK)', () => {
    // 1000 ASCII bytes then 3000 bytes of CJK: pieces of equal character count would not fit.
    const text = `${'a'.repeat(1000)}${'日'.repeat(1000)}`;
    const chunks = chunkTranscript([text], 500, bytesOver4);
    expect(chunks.join('')).toBe(text);
    for (const chunk of chunks) expect(bytesOver4(chunk)).toBeLessThanOrEqual(500);
  });

  it('keeps every piece within the chunk when the measure adds a fixed cost per text', () => {
    const text = 'y'.repeat(2028); // 507 + 5 tokens: two pieces of half the text would cost 253 + 5 each
    const chunks = chunkTranscript([text], 256, (piece) => estimateTokens(piece) + 5);
    expect(chunks.join('')).toBe(text);
    for (const chunk of chunks) expect(estimateTokens(chunk) + 5).toBeLessThanOrEqual(256);
  });

  it('never splits a surrogate pair', () => {
    const text = '😀'.repeat(301);
    for (const chunkTokens of [7, 10, 33, 100]) {
      const chunks = chunkTranscript([text], chunkTokens, bytesOver4);
      expect(chunks.join('')).toBe(text);
      for (const chunk of chunks) {
        expect(hasLoneSurrogate(chunk)).toBe(false);
        expect(bytesOver4(chunk)).toBeLessThanOrEqual(chunkTokens);
      }
    }
  });

  it('property: every chunk fits by the given measure, nothing lost or reordered, no lone surrogate', () => {
    const textArbitrary = fc.oneof(
      fc.string({ unit: 'grapheme', minLength: 1, maxLength: 60 }),
      fc.string({ unit: fc.constantFrom('a', 'é', '日', '😀', '\n', ' '), minLength: 1, maxLength: 400 }),
      // Narrow characters then wide ones: bytes are far from evenly spread over the characters.
      fc
        .tuple(
          fc.string({ unit: fc.constantFrom('a', ' '), minLength: 20, maxLength: 300 }),
          fc.string({ unit: fc.constantFrom('日', '😀'), minLength: 20, maxLength: 300 }),
        )
        .map(([narrow, wide]) => narrow + wide),
    );
    const measureArbitrary = fc.constantFrom(
      { name: 'bytes / 4', tokensOf: bytesOver4, smallest: 12 },
      { name: 'as a message', tokensOf: asMessage, smallest: 12 },
    );
    fc.assert(
      fc.property(fc.array(textArbitrary, { maxLength: 8 }), fc.integer({ min: 12, max: 200 }), measureArbitrary, (rendered, chunkTokens, measure) => {
        const chunks = chunkTranscript(rendered, chunkTokens, measure.tokensOf);
        for (const chunk of chunks) {
          expect(measure.tokensOf(chunk)).toBeLessThanOrEqual(chunkTokens);
          expect(chunk).not.toBe('');
          expect(hasLoneSurrogate(chunk)).toBe(false);
        }
        // Everything kept in order: only the blank lines between messages may go where a chunk ends.
        const withoutNewlines = (text: string) => text.replace(/\n/g, '');
        expect(withoutNewlines(chunks.join(''))).toBe(withoutNewlines(rendered.join('')));
        if (rendered.every((text) => measure.tokensOf(text) <= chunkTokens)) {
          expect(chunks.join('\n\n')).toBe(rendered.join('\n\n'));
        }
      }),
      propertyParameters,
    );
  });
});
