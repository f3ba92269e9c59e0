import { describe, expect, it } from 'vitest';
import { FakeUpstream, replies } from '../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';

/**
 * Issue 21 item 2: beyond linear, the loop stays free. Planning work is
 * capped per request (`limits.max_items`: messages, tool calls and content
 * parts); a request beyond it is refused with a 413 naming the limit, before
 * any pair check or plan, on every chat route.
 */

const opened = closedAfterEachTest();
const call = (id: string) => ({ id, type: 'function', function: { name: 'f', arguments: '{}' } });

/** n steps: n assistant messages with one call each and their n results, after one user message: 3n + 1 items. */
function chatBody(steps: number) {
  const messages: unknown[] = [{ role: 'user', content: 'go' }];
  for (let index = 0; index < steps; index++) messages.push({ role: 'assistant', content: '', tool_calls: [call(`c${index}`)] }, { role: 'tool', tool_call_id: `c${index}`, content: 'ok' });
  return { model: 'm', messages };
}

function messagesBody(blocks: number) {
  const uses = Array.from({ length: blocks }, (_, index) => ({ type: 'tool_use', id: `t${index}`, name: 'f', input: {} }));
  return { model: 'm', max_tokens: 16, messages: [{ role: 'user', content: 'go' }, { role: 'assistant', content: uses }, { role: 'user', content: uses.map((use) => ({ type: 'tool_result', tool_use_id: use.id, content: 'r' })) }] };
}

describe('issue 21 item 2: planning work is capped per request', () => {
  it('a request past limits.max_items gets a 413 naming the limit on chat, messages and compact; one within it is served', async () => {
    const upstream = opened(await FakeUpstream.start());
    upstream.route('POST', '/v1/chat/completions', replies.chat());
    upstream.route('POST', '/v1/messages', replies.json(200, { type: 'message', role: 'assistant', content: [{ type: 'text', text: 'hi' }] }));
    const proxy = opened(await startProxy(upstream, { config: { limits: { max_items: 100 } } }));
    const post = (url: string, payload: unknown) => proxy.app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json' }, payload: JSON.stringify(payload) });

    for (const [url, payload] of [
      ['/v1/chat/completions', chatBody(40)],
      ['/v1/compact', chatBody(40)],
      ['/v1/messages', messagesBody(60)],
    ] as const) {
      const answer = await post(url, payload);
      expect(answer.statusCode, url).toBe(413);
      expect(answer.body, url).toContain('limits.max_items');
      expect(answer.body, url).toContain('100');
    }
    expect(upstream.requests).toHaveLength(0);
    expect((await post('/v1/chat/completions', chatBody(30))).statusCode).toBe(200);
  });
});
