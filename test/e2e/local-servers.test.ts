import { describe, expect, it } from 'vitest';
import { conversation } from '../support/conversation.js';
import { FakeUpstream } from '../support/fake-upstream.js';
import { lmStudio, ollama, vllm } from '../support/local-servers.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';

/**
 * Issue 37, through the proxy: in front of each server's double (cited in
 * test/support/local-servers.ts), a conversation larger than the window the
 * server runs with. vLLM and LM Studio refuse it in their own words, which
 * compactor learns from as it does llama-server's; Ollama would cut it
 * silently, so compactor must plan with the runner's window and never send
 * more.
 */

const opened = closedAfterEachTest();

async function send(url: string, model: string, messages: unknown[]): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model, messages }) });
}

// ~12k tokens: well under a 32k window's threshold, over the 4096 each double runs with.
const LONG = conversation({ turns: 24, resultBytes: 800 });

describe('a window configured larger than the server runs with', () => {
  const servers = [
    { name: 'vLLM: its 400 "This model\'s maximum context length is 8192 tokens …"', model: 'Qwen/Qwen3-8B', double: vllm },
    { name: 'LM Studio: its 400 "… (n_keep: …>= n_ctx: 8192)"', model: 'qwen3-14b', double: lmStudio },
  ];
  it.each(servers)('$name is learned: the request compacted and sent again, answered 200', async ({ model, double }) => {
    const upstream = opened(await FakeUpstream.start());
    const llama = double(upstream, { model, window: 8192, trained: 40_960 });
    const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true }, models: { '*': { context_window: 32_768 } } } }));
    const response = await send(proxy.url, model, LONG);
    expect(response.status).toBe(200);
    expect(response.headers.get('x-compactor')).toMatch(/^upstream window 8192 learned from its refusal, sent again/);
    await response.arrayBuffer();
    expect(llama.chatRecords.map((record) => record.status)).toEqual([400, 200]);
    expect(llama.chatRecords[1]!.promptTokens).toBeLessThanOrEqual(8192);
  });
});

describe('Ollama, which cuts a longer prompt without an error', () => {
  it("is never sent more than its runner's window (/api/ps context_length): compacted before, nothing cut", async () => {
    const upstream = opened(await FakeUpstream.start());
    const llama = ollama(upstream, { model: 'qwen3:latest', window: 8192, trained: 40_960 });
    const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true } } }));
    const response = await send(proxy.url, 'qwen3', LONG);
    expect(response.status).toBe(200);
    expect(response.headers.get('x-compactor')).toMatch(/summarized \d+ messages/);
    await response.arrayBuffer();
    expect(llama.truncated).toBe(0);
    for (const record of llama.chatRecords) expect(record.promptTokens).toBeLessThanOrEqual(8192);
  });
});
