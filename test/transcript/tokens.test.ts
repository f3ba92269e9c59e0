import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import type { ChatMessage } from '../../src/transcript/message.js';
import {
  estimateMessageTokens,
  estimateMessagesTokens,
  estimateRequestTokens,
  estimateTokens,
  estimateToolsTokens,
  FRAMING_TOKENS_PER_MESSAGE,
  MEDIA_PART_TOKENS,
  utf8ByteLength,
} from '../../src/transcript/tokens.js';
import { anyTranscriptArbitrary, call, propertyParameters } from './arbitraries.js';

describe('estimateTokens', () => {
  it('@example: floor of UTF-8 bytes / 4', () => {
    expect(estimateTokens('Hello world')).toBe(2);
    expect(estimateTokens('antidisestablishmentarianism')).toBe(7);
    expect(estimateTokens(null)).toBe(0);
  });

  it('counts the empty string, null and undefined as 0', () => {
    expect(estimateTokens('')).toBe(0);
    expect(estimateTokens(undefined)).toBe(0);
  });

  it('counts bytes, not characters', () => {
    expect(estimateTokens('日本語')).toBe(2); // 9 bytes
    expect(estimateTokens('😀😀')).toBe(2); // 8 bytes, 4 UTF-16 units
    expect(estimateTokens('abc')).toBe(0);
  });

  it('is fast on multi-megabyte strings', () => {
    const text = 'x'.repeat(8 * 1024 * 1024) + '€'.repeat(1024 * 1024);
    const started = performance.now();
    expect(estimateTokens(text)).toBe((8 * 1024 * 1024 + 3 * 1024 * 1024) / 4);
    expect(performance.now() - started).toBeLessThan(500);
  });

  it('property: agrees with TextEncoder on well-formed text', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), (text) => {
        expect(estimateTokens(text)).toBe(Math.floor(new TextEncoder().encode(text).length / 4));
        expect(utf8ByteLength(text)).toBe(new TextEncoder().encode(text).length);
      }),
      propertyParameters,
    );
  });

  it('property: never negative; estimateTokens(a + b) is the sum of the parts or one more', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), fc.string({ unit: 'grapheme' }), (a, b) => {
        const whole = estimateTokens(a + b);
        const parts = estimateTokens(a) + estimateTokens(b);
        expect(estimateTokens(a)).toBeGreaterThanOrEqual(0);
        expect(whole).toBeGreaterThanOrEqual(parts);
        expect(whole).toBeLessThanOrEqual(parts + 1);
      }),
      propertyParameters,
    );
  });
});

describe('estimateMessagesTokens', () => {
  it('@example: sums the bytes of all messages and divides once', () => {
    expect(
      estimateMessagesTokens([
        { role: 'user', content: 'Hello' },
        { role: 'assistant', content: 'Hi there' },
      ]),
    ).toBe(3); // 5 + 8 = 13 bytes
  });

  it('counts content text parts, call ids, names and arguments, and tool_call_id, but no framing or media', () => {
    const messages: ChatMessage[] = [
      { role: 'user', content: [{ type: 'text', text: 'abcd' }, { type: 'image_url', image_url: { url: 'x'.repeat(4000) } }] },
      { role: 'assistant', content: null, tool_calls: [call('c1', 'bash', '{"cmd":"ls"}')] }, // 2 + 4 + 12 bytes
      { role: 'tool', tool_call_id: 'c1', content: 'ab' }, // 2 + 2 bytes
    ];
    expect(estimateMessagesTokens(messages)).toBe(Math.floor((4 + 18 + 4) / 4));
    expect(estimateMessagesTokens([])).toBe(0);
  });
});

describe('estimateMessageTokens', () => {
  it('@example: text tokens plus 4 of framing', () => {
    expect(estimateMessageTokens({ role: 'user', content: 'Hello world' })).toBe(6);
    expect(FRAMING_TOKENS_PER_MESSAGE).toBe(4);
  });

  it('counts a fixed cost per non-text part, never the bytes of its data URL', () => {
    const image = { type: 'image_url', image_url: { url: `data:image/png;base64,${'A'.repeat(100_000)}` } };
    expect(estimateMessageTokens({ role: 'user', content: [image, image] })).toBe(2 * MEDIA_PART_TOKENS + 4);
    expect(estimateMessageTokens({ role: 'user', content: [{ type: 'input_audio', input_audio: {} }] })).toBe(
      MEDIA_PART_TOKENS + 4,
    );
  });

  it('counts calls: id, name and arguments', () => {
    const message: ChatMessage = { role: 'assistant', content: '', tool_calls: [call('c1', 'bash', '{"cmd":"ls -la /"}')] };
    expect(estimateMessageTokens(message)).toBe(Math.floor((2 + 4 + 18) / 4) + 4);
  });

  it('counts an empty message as its framing alone', () => {
    expect(estimateMessageTokens({ role: 'assistant' })).toBe(4);
    expect(estimateMessageTokens({ role: 'assistant', content: null, tool_calls: null })).toBe(4);
  });
});

describe('estimateToolsTokens', () => {
  it('@example: bytes of the JSON / 4', () => {
    expect(estimateToolsTokens([{ type: 'function', function: { name: 'bash' } }])).toBe(12);
  });

  it('counts absent or null tools as 0', () => {
    expect(estimateToolsTokens(undefined)).toBe(0);
    expect(estimateToolsTokens(null)).toBe(0);
  });
});

const toolsArbitrary = fc.option(
  fc.array(
    fc.record({
      type: fc.constant('function'),
      function: fc.record({ name: fc.string(), description: fc.string({ unit: 'grapheme' }), parameters: fc.jsonValue() }),
    }),
    { maxLength: 3 },
  ),
  { nil: undefined },
);

describe('estimateRequestTokens', () => {
  it('@example: one message of 2 text tokens and 4 of framing', () => {
    expect(estimateRequestTokens({ messages: [{ role: 'user', content: 'Hello world' }] })).toBe(6);
  });

  it('adds the tool definitions', () => {
    const tools = [{ type: 'function', function: { name: 'bash' } }];
    expect(estimateRequestTokens({ messages: [{ role: 'user', content: 'Hello world' }], tools })).toBe(6 + 12);
  });

  it('property: additive, the sum of per-message estimates plus the tools estimate', () => {
    fc.assert(
      fc.property(anyTranscriptArbitrary, toolsArbitrary, (messages, tools) => {
        const sum = messages.reduce((total, message) => total + estimateMessageTokens(message), 0);
        expect(estimateRequestTokens({ messages, tools })).toBe(sum + estimateToolsTokens(tools));
      }),
      propertyParameters,
    );
  });

  it('property: a range split anywhere adds up to the whole', () => {
    fc.assert(
      fc.property(anyTranscriptArbitrary, fc.nat(), (messages, position) => {
        const cut = position % (messages.length + 1);
        const whole = estimateRequestTokens({ messages });
        const parts =
          estimateRequestTokens({ messages: messages.slice(0, cut) }) + estimateRequestTokens({ messages: messages.slice(cut) });
        expect(parts).toBe(whole);
      }),
      propertyParameters,
    );
  });

  it('property: text-only estimate is within one token per message of the per-message text estimates', () => {
    fc.assert(
      fc.property(anyTranscriptArbitrary, (messages) => {
        const textOnly = messages.filter((message) => !Array.isArray(message.content));
        const perMessage = textOnly.reduce(
          (total, message) => total + estimateMessageTokens(message) - FRAMING_TOKENS_PER_MESSAGE,
          0,
        );
        const once = estimateMessagesTokens(textOnly);
        expect(once).toBeGreaterThanOrEqual(perMessage);
        expect(once).toBeLessThan(perMessage + Math.max(1, textOnly.length));
      }),
      propertyParameters,
    );
  });
});
