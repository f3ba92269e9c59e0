import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import type { ChatMessage } from '../../src/transcript/message.js';
import { DEFAULT_MAX_RESULT_CHARS, elisionMarker, pruneText, pruneToolResults } from '../../src/transcript/prune.js';
import { anyTranscriptArbitrary, hasLoneSurrogate, propertyParameters, textArbitrary } from './arbitraries.js';

const bytes = (text: string): number => Buffer.byteLength(text, 'utf8');

const MARKER = /\n\[… (\d+) bytes elided …\]\n/g;

/**
 * Reads a pruned text back as head + marker + tail, checking the guarantees
 * that tie it to the original: the head is a prefix, the tail a suffix, the
 * marker's count is the bytes in between. Tries every marker-shaped match,
 * since the original text may hold the marker's words itself.
 */
function readPruned(original: string, pruned: string): { head: string; tail: string; elided: number } | undefined {
  for (const match of pruned.matchAll(MARKER)) {
    const head = pruned.slice(0, match.index);
    const tail = pruned.slice(match.index + match[0].length);
    const elided = Number(match[1]);
    if (
      original.startsWith(head) &&
      original.endsWith(tail) &&
      head.length + tail.length < original.length &&
      bytes(head) + elided + bytes(tail) === bytes(original)
    ) {
      return { head, tail, elided };
    }
  }
  return undefined;
}

const isHigh = (code: number) => code >= 0xd800 && code <= 0xdbff;
const isLow = (code: number) => code >= 0xdc00 && code <= 0xdfff;
const splitsPair = (text: string, index: number) =>
  index > 0 && index < text.length && isHigh(text.charCodeAt(index - 1)) && isLow(text.charCodeAt(index));

/** Long texts of every kind, including astral characters (surrogate pairs) next to any cut. */
const longTextArbitrary = fc.oneof(
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 400 }),
  fc.string({ unit: fc.constantFrom('a', 'é', '€', '😀', '𝄞'), minLength: 1, maxLength: 400 }),
);
/** Limits from the degenerate (the marker does not fit) to larger than most texts. */
const limitArbitrary = fc.oneof(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 500 }));

describe('pruneText', () => {
  it('@example: keeps four fifths of the kept characters from the head and one fifth from the tail', () => {
    expect(pruneText('a'.repeat(100), 50)).toBe(`${'a'.repeat(22)}\n[… 73 bytes elided …]\n${'a'.repeat(5)}`);
  });

  it('returns a text within the limit as is', () => {
    expect(pruneText('short', 5)).toBe('short');
    expect(pruneText('', 0)).toBe('');
  });

  it('writes the marker exactly as DESIGN says, with N in plain digits', () => {
    expect(elisionMarker(12345)).toBe('\n[… 12345 bytes elided …]\n');
  });

  it('counts the elided middle in UTF-8 bytes, not characters', () => {
    const pruned = pruneText('€'.repeat(100), 50); // € is 3 bytes
    const read = readPruned('€'.repeat(100), pruned);
    expect(read?.elided).toBe(3 * (100 - read!.head.length - read!.tail.length));
  });

  it('never separates a surrogate pair: the cut moves so the emoji stays whole or goes whole', () => {
    const text = '😀'.repeat(100); // every even index is a boundary, every odd one splits a pair
    for (let limit = 24; limit < 120; limit++) {
      const pruned = pruneText(text, limit);
      expect(pruned.length).toBeLessThanOrEqual(limit);
      expect(hasLoneSurrogate(pruned)).toBe(false);
      expect(readPruned(text, pruned)).toBeDefined();
    }
  });

  it('uses the whole limit whether or not the marker needs one more digit', () => {
    // Keeping 29 of 128 drops 99 bytes: two digits fit, and the result fills the limit.
    expect(pruneText('z'.repeat(128), 52)).toBe(`${'z'.repeat(24)}\n[… 99 bytes elided …]\n${'z'.repeat(5)}`);
    // Keeping 29 of 130 would drop 101 bytes, which needs a third digit: keep 28, drop 102.
    expect(pruneText('z'.repeat(130), 52)).toBe(`${'z'.repeat(23)}\n[… 102 bytes elided …]\n${'z'.repeat(5)}`);
  });

  it('below the marker length, gives the marker cut to the limit, and pruning that again changes nothing', () => {
    const text = 'b'.repeat(200);
    expect(pruneText(text, 0)).toBe('');
    expect(pruneText(text, 5)).toBe('\n[… 2');
    expect(pruneText(text, 24)).toBe('\n[… 200 bytes elided …]\n');
    for (let limit = 0; limit <= 24; limit++) {
      const pruned = pruneText(text, limit);
      expect(pruned.length).toBeLessThanOrEqual(limit);
      expect(pruneText(pruned, limit)).toBe(pruned);
    }
  });

  it('treats Infinity as no limit and rejects negative or fractional limits', () => {
    expect(pruneText('x'.repeat(10_000), Infinity)).toBe('x'.repeat(10_000));
    expect(() => pruneText('text', -1)).toThrow(RangeError);
    expect(() => pruneText('text', 2.5)).toThrow(RangeError);
    expect(() => pruneText('text', Number.NaN)).toThrow(RangeError);
  });

  it('prunes a multi-megabyte result quickly', () => {
    const text = 'line of output\n'.repeat(400_000); // 6 MB
    const started = performance.now();
    const pruned = pruneText(text, DEFAULT_MAX_RESULT_CHARS);
    expect(performance.now() - started).toBeLessThan(1000);
    expect(pruned.length).toBeLessThanOrEqual(DEFAULT_MAX_RESULT_CHARS);
  });

  it('property: the result fits the limit and pruning it again changes nothing', () => {
    fc.assert(
      fc.property(longTextArbitrary, limitArbitrary, (text, limit) => {
        const pruned = pruneText(text, limit);
        expect(pruned.length).toBeLessThanOrEqual(limit);
        expect(pruneText(pruned, limit)).toBe(pruned);
      }),
      propertyParameters,
    );
  });

  it('property: head + marker + tail, with head + elided + tail bytes equal to the original bytes', () => {
    fc.assert(
      fc.property(longTextArbitrary, limitArbitrary, (text, limit) => {
        const pruned = pruneText(text, limit);
        if (text.length <= limit) {
          expect(pruned).toBe(text);
          return;
        }
        if (limit < elisionMarker(bytes(text)).length) return; // the degenerate case, tested above
        const read = readPruned(text, pruned);
        expect(read).toBeDefined();
        const { head, tail } = read!;
        // Four fifths from the head, rounded up, less one character when the cut would split a pair.
        const kept = head.length + tail.length;
        expect(head.length + 1).toBeGreaterThanOrEqual(4 * tail.length);
        expect(head.length).toBeLessThanOrEqual(Math.ceil(((kept + 2) * 4) / 5));
        // As long as the limit allows: only a cut moved off a surrogate pair costs a character.
        expect(pruned.length).toBeGreaterThanOrEqual(limit - 2);
      }),
      propertyParameters,
    );
  });

  it('property: a well-formed text gives a well-formed result', () => {
    fc.assert(
      fc.property(longTextArbitrary, limitArbitrary, (text, limit) => {
        expect(hasLoneSurrogate(pruneText(text, limit))).toBe(false);
      }),
      propertyParameters,
    );
  });

  it('property: with lone surrogates in the input, the cuts still never split a pair and kept text is verbatim', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', minLength: 1, maxLength: 200 }), limitArbitrary, (text, limit) => {
        const pruned = pruneText(text, limit);
        if (text.length <= limit || limit < elisionMarker(bytes(text)).length) return;
        const read = readPruned(text, pruned);
        expect(read).toBeDefined();
        expect(splitsPair(text, read!.head.length)).toBe(false);
        expect(splitsPair(text, text.length - read!.tail.length)).toBe(false);
      }),
      propertyParameters,
    );
  });
});

const toolResult = (id: string, content: ChatMessage['content']): ChatMessage => ({
  role: 'tool',
  tool_call_id: id,
  content,
});

describe('pruneToolResults', () => {
  it('@example: prunes a 10 000 character result to the default 8192', () => {
    expect(pruneToolResults([{ role: 'tool', tool_call_id: 'c1', content: 'x'.repeat(10_000) }])).toEqual([
      { role: 'tool', tool_call_id: 'c1', content: `${'x'.repeat(6534)}\n[… 1833 bytes elided …]\n${'x'.repeat(1633)}` },
    ]);
    expect(DEFAULT_MAX_RESULT_CHARS).toBe(8192);
  });

  it('rewrites only the content of long tool results and keeps every other field', () => {
    const long = { role: 'tool', tool_call_id: 'c1', content: 'y'.repeat(100), name: 'bash', extra: { kept: true } };
    const user: ChatMessage = { role: 'user', content: 'u'.repeat(100) };
    const assistant: ChatMessage = { role: 'assistant', content: 'a'.repeat(100) };
    const parts = toolResult('c2', [{ type: 'text', text: 'p'.repeat(100) }]);
    const short = toolResult('c3', 'ok');
    const input = [user, assistant, long, parts, short];
    const output = pruneToolResults(input, 40);
    expect(output).toHaveLength(5);
    expect(output[0]).toBe(user);
    expect(output[1]).toBe(assistant);
    expect(output[2]).not.toBe(long);
    expect(output[2]).toEqual({ ...long, content: pruneText(long.content, 40) });
    expect(output[3]).toBe(parts);
    expect(output[3]!.content).toBe(parts.content);
    expect(output[4]).toBe(short);
    expect(long.content).toBe('y'.repeat(100));
  });

  it('returns the input array itself when nothing needs pruning', () => {
    const input = [toolResult('c1', 'short')];
    expect(pruneToolResults(input, 40)).toBe(input);
  });

  it('prunes only inside [from, to) when a range is given, clamping it to the array', () => {
    const input = [0, 1, 2, 3].map((index) => toolResult(`c${index}`, 'x'.repeat(100)));
    const output = pruneToolResults(input, 40, { from: 1, to: 3 });
    expect(output[0]).toBe(input[0]);
    expect(output[1]!.content).toHaveLength(40);
    expect(output[2]!.content).toHaveLength(40);
    expect(output[3]).toBe(input[3]);
    expect(pruneToolResults(input, 40, { to: 1 })[1]).toBe(input[1]);
    expect(pruneToolResults(input, 40, { from: -5, to: 99 }).every((message) => message.content!.length === 40)).toBe(true);
    expect(pruneToolResults(input, 40, { from: 3, to: 1 })).toBe(input);
  });

  it('prunes only the long results that shouldPrune accepts, asking it about those alone', () => {
    const input = [toolResult('c0', 'x'.repeat(100)), toolResult('c1', 'short'), toolResult('c2', 'x'.repeat(100))];
    const asked: number[] = [];
    const output = pruneToolResults(input, 40, {
      from: 0,
      shouldPrune: (message, index) => {
        asked.push(index);
        return message.tool_call_id === 'c2';
      },
    });
    expect(asked).toEqual([0, 2]);
    expect(output[0]).toBe(input[0]);
    expect(output[1]).toBe(input[1]);
    expect(output[2]!.content).toHaveLength(40);
    expect(pruneToolResults(input, 40, { shouldPrune: () => false })).toBe(input);
  });

  it('property: same length and order, untouched messages the same objects, input not mutated, idempotent', () => {
    fc.assert(
      fc.property(
        anyTranscriptArbitrary,
        fc.integer({ min: 0, max: 30 }),
        fc.option(fc.record({ from: fc.integer({ min: -2, max: 30 }), to: fc.integer({ min: -2, max: 30 }) }), {
          nil: undefined,
        }),
        (messages, limit, range) => {
          const copy = structuredClone(messages);
          const output = pruneToolResults(messages, limit, range);
          expect(messages).toEqual(copy);
          expect(output).toHaveLength(messages.length);
          const from = Math.max(0, range?.from ?? 0);
          const to = range?.to ?? messages.length;
          messages.forEach((message, index) => {
            const inRange = index >= from && index < to;
            const long = typeof message.content === 'string' && message.content.length > limit;
            if (message.role === 'tool' && long && inRange) {
              expect(output[index]).toEqual({ ...message, content: pruneText(message.content as string, limit) });
            } else {
              expect(output[index]).toBe(message);
            }
          });
          expect(pruneToolResults(output, limit, range)).toBe(output);
        },
      ),
      propertyParameters,
    );
  });

  it('property: every pruned result fits the limit', () => {
    fc.assert(
      fc.property(fc.array(textArbitrary, { maxLength: 8 }), fc.integer({ min: 0, max: 30 }), (texts, limit) => {
        const output = pruneToolResults(texts.map((text, index) => toolResult(`c${index}`, text)), limit);
        for (const message of output) expect((message.content as string).length).toBeLessThanOrEqual(limit);
      }),
      propertyParameters,
    );
  });
});
