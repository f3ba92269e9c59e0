import { describe, expect, it } from 'vitest';
import { formatAt, readInput } from '../../support/formats.js';
import type { ChatMessage } from '../../../src/transcript/message.js';
import { runNow } from '../../../src/transcript/slices.js';

/**
 * issue 24: the Messages API written back. A user turn that repeats a
 * `tool_use_id` comes out as the core left each of its results; a message
 * the core kept is spliced from the client's bytes, never parsed and
 * serialized again.
 */

const MESSAGES = formatAt('/v1/messages');

function read(body: string) {
  const raw = Buffer.from(body);
  const request = runNow(MESSAGES.read(readInput(raw, 'off')));
  return { raw, request, messages: request.pairs.body.messages };
}

describe('issue 24: Messages write-back', () => {
  it('keeps each of two results with the same tool_use_id as the core left it, is_error included', () => {
    const body = JSON.stringify({
      model: 'm',
      max_tokens: 64,
      messages: [
        { role: 'user', content: 'run it twice' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'run', input: {} }, { type: 'tool_use', id: 't1', name: 'run', input: {} }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'first' }, { type: 'tool_result', tool_use_id: 't1', content: 'second', is_error: true }] },
      ],
    });
    const { raw, request, messages } = read(body);
    // The core changes the first result only (as pruning does: a copy with new content).
    const changed: ChatMessage[] = messages.map((message, index) => (index === 2 ? { ...message, content: 'first, pruned' } : message));
    const sent = JSON.parse(request.bytesFor(raw, changed).toString('utf8')) as { messages: Array<{ content: unknown }> };
    expect(sent.messages[2]!.content).toEqual([
      { type: 'tool_result', tool_use_id: 't1', content: 'first, pruned' },
      { type: 'tool_result', tool_use_id: 't1', content: 'second', is_error: true },
    ]);
  });

  it('splices a kept message byte for byte: an integer past 2^53 in a tool_use input goes out as it came', () => {
    const kept = '{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"seek","input":{"offset":9007199254740993}}]}';
    const body = `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"seek"},${kept},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]},{"role":"user","content":"and again"}]}`;
    const { raw, request, messages } = read(body);
    // The core changes the last message only.
    const changed: ChatMessage[] = messages.map((message, index) => (index === messages.length - 1 ? { ...message, content: 'and again, please' } : message));
    const sent = request.bytesFor(raw, changed).toString('utf8');
    expect(sent).toContain(kept);
    expect(sent).toContain('9007199254740993');
    expect((JSON.parse(sent) as { messages: unknown[] }).messages).toHaveLength(4);
  });
});
