import { describe, it, expect } from 'vitest';
import { ChatMessageSchema, ChatMessagesSchema, contentText, toolCallsOf } from '../../src/transcript/message.js';
import { call } from './arbitraries.js';

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
