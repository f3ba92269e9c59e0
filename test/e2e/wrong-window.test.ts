import { describe, expect, it } from 'vitest';
import { conversation } from '../support/conversation.js';
import { FakeUpstream } from '../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';
import { SimulatedLlama } from '../support/simulated-llama.js';

/**
 * Issue 12, item 3: when the upstream answers 400 `exceed_context_size_error`
 * with an `n_ctx` smaller than the window compactor planned with (a
 * `context_window` set too large, a server restarted with a smaller `-c`),
 * compactor learns that `n_ctx`, compacts, and sends the request once more:
 * nothing was generated, so it is safe. The log and the header say so.
 */

const opened = closedAfterEachTest();

async function send(url: string, messages: unknown[]): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'sim', messages }) });
}

describe('a window configured larger than the server serves', () => {
  it('is learned from the refusal: compacted and sent again once, answered 200, said in the header and the log', async () => {
    const upstream = opened(await FakeUpstream.start());
    const llama = new SimulatedLlama(upstream, { window: 8192 });
    const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true }, models: { '*': { context_window: 32768 } } } }));
    // ~12k tokens: well under a 32k window's threshold, over the 8k the server serves.
    const messages = conversation({ turns: 24, resultBytes: 800 });
    const response = await send(proxy.url, messages);
    expect(response.status).toBe(200);
    expect(response.headers.get('x-compactor')).toMatch(/^upstream window 8192 learned from its refusal, sent again; summarized \d+ messages/);
    await response.arrayBuffer();
    const chats = llama.chatRecords;
    expect(chats.map((record) => record.status)).toEqual([400, 200]);
    expect(chats[1]!.promptTokens).toBeLessThanOrEqual(8192);
    const warnings = proxy.logs.entries().filter((line) => line['level'] === 40 && String(line['msg']).startsWith('the upstream refused the prompt'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ model: 'sim', window: 8192 });

    // The next request plans with the learned window at once: no refusal.
    const next = await send(proxy.url, [...messages, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'and now?' }]);
    expect(next.status).toBe(200);
    await next.arrayBuffer();
    expect(llama.chatRecords.map((record) => record.status)).toEqual([400, 200, 200]);
  });

  it('relays a refusal as it came when the window it names is not smaller than planned (sending again would not help)', async () => {
    const upstream = opened(await FakeUpstream.start());
    const llama = new SimulatedLlama(upstream, { window: 8192 });
    const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: false } } }));
    const response = await send(proxy.url, conversation({ turns: 24, resultBytes: 800 }));
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: { type: 'exceed_context_size_error', n_ctx: 8192 } });
    expect(llama.chatRecords.map((record) => record.status)).toEqual([400]);
  });
});
