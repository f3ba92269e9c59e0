import fc from 'fast-check';
import { describe, it, expect } from 'vitest';
import { ChatRequestSchema, isChatRequestBody } from '../../src/formats/chat/read.js';
import { ChatMessageSchema, ChatMessagesSchema, contentText, isChatMessage, isChatMessageList, toolCallsOf } from '../../src/transcript/message.js';
import { call, propertyParameters } from './arbitraries.js';

describe('ChatMessageSchema', () => {
  it('is loose: unknown fields and unknown roles pass through untouched', () => {
    const message = { role: 'critic', content: 'x', reasoning_content: 'because', extra: { deep: [1] } };
    const parsed = ChatMessageSchema.safeParse(message);
    expect(parsed.success).toBe(true);
    expect(parsed.data).toEqual(message);
  });

  it('rejects a message without a string role, and an empty list of messages', () => {
    expect(ChatMessageSchema.safeParse({ content: 'x' }).success).toBe(false);
    expect(ChatMessagesSchema.safeParse([]).success).toBe(false);
  });
});

/** Values near the schema's edges: each field right, wrong in type, or absent, and some extra keys. */
const fieldValue = fc.oneof(fc.string({ maxLength: 3 }), fc.integer(), fc.constant(null), fc.boolean(), fc.constant([]), fc.constant({}));
function maybe(right: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> {
  return fc.oneof({ weight: 4, arbitrary: right }, { weight: 1, arbitrary: fieldValue }, { weight: 1, arbitrary: fc.constant(undefined) });
}
function record(fields: Record<string, fc.Arbitrary<unknown>>): fc.Arbitrary<unknown> {
  const shaped = fc.record(fields, { requiredKeys: [] }).map((value) => Object.fromEntries(Object.entries(value).filter(([, field]) => field !== undefined)));
  return fc.oneof({ weight: 8, arbitrary: fc.tuple(shaped, fc.dictionary(fc.string({ maxLength: 3 }), fieldValue, { maxKeys: 2 })).map(([value, extra]) => ({ ...extra, ...value })) }, { weight: 1, arbitrary: fieldValue });
}
const part = record({ type: maybe(fc.string({ maxLength: 4 })), text: maybe(fc.string({ maxLength: 4 })) });
const toolCall = record({
  id: maybe(fc.string({ maxLength: 4 })),
  type: maybe(fc.constant('function')),
  function: maybe(record({ name: maybe(fc.string({ maxLength: 4 })), arguments: maybe(fc.string({ maxLength: 4 })) })),
});
const message = record({
  role: maybe(fc.constantFrom('user', 'assistant', 'tool', 'system')),
  content: maybe(fc.oneof(fc.string({ maxLength: 4 }), fc.constant(null), fc.array(part, { maxLength: 3 }))),
  tool_calls: maybe(fc.oneof(fc.constant(null), fc.array(toolCall, { maxLength: 3 }))),
  tool_call_id: maybe(fc.string({ maxLength: 4 })),
});

describe('isChatMessage, isChatMessageList and isChatRequestBody', () => {
  it('agree with the zod schemas on every value, right or wrong (they stand in for them on the request path)', () => {
    fc.assert(
      fc.property(fc.array(message, { maxLength: 4 }), maybe(fc.string({ maxLength: 3 })), (messages, model) => {
        for (const each of messages) expect(isChatMessage(each)).toBe(ChatMessageSchema.safeParse(each).success);
        expect(isChatMessageList(messages)).toBe(ChatMessagesSchema.safeParse(messages).success);
        const body: Record<string, unknown> = { messages, ...(model === undefined ? {} : { model }) };
        expect(isChatRequestBody(body)).toBe(ChatRequestSchema.safeParse(body).success);
      }),
      { ...propertyParameters, numRuns: propertyParameters.numRuns! * 5 },
    );
  });

  it('keep the caller\'s objects: nothing is copied', () => {
    const body = { model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }], stream: true };
    expect(isChatRequestBody(body)).toBe(true);
    expect(body.messages[0]!.content[0]).toEqual({ type: 'text', text: 'hi' });
    expect(isChatMessageList('not a list')).toBe(false);
  });
});

describe('contentText', () => {
  it('gives a string as is, joins text parts with newlines, skips other parts', () => {
    expect(contentText('plain')).toBe('plain');
    expect(contentText([{ type: 'text', text: 'a' }, { type: 'image_url' }, { type: 'text', text: 'b' }])).toBe('a\nb');
    expect(contentText(null)).toBe('');
    expect(contentText(undefined)).toBe('');
  });
});

describe('toolCallsOf', () => {
  it('lists the calls of an assistant message, and none for any other role', () => {
    const calls = [call('c1')];
    expect(toolCallsOf({ role: 'assistant', tool_calls: calls })).toBe(calls);
    expect(toolCallsOf({ role: 'assistant', tool_calls: null })).toEqual([]);
    expect(toolCallsOf({ role: 'user', tool_calls: calls })).toEqual([]);
  });
});
