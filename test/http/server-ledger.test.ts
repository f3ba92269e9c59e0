import { describe, expect, it } from 'vitest';
import { FakeUpstream } from '../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';
import { SIMULATED_SPEEDS, SimulatedLlama } from '../support/simulated-llama.js';
import { AGENT_TOOLS, runAgent } from '../e2e/agent-run.js';

/**
 * Issue 36 items 1, 2, 3 and 5 through the proxy: the server seconds of
 * every answer and summary (`compactor_upstream_seconds_total`), the learned
 * speeds (`compactor_server_tokens_per_second`), the prefix breaks
 * (`compactor_prefix_breaks_total`, `compactor_prefix_tokens_recomputed_total`),
 * the log line's `prefillMs` / `decodeMs`, and the dashboard's ledger. The
 * simulated llama-server reports `timings` as llama-server does
 * (test/fixtures/llama-server/chat_stream.txt), at 5,000 / 130 tokens a second.
 */

const opened = closedAfterEachTest();

function total(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || !(line.startsWith(`${name}{`) || line.startsWith(`${name} `))) continue;
    if (Object.entries(labels).every(([label, value]) => line.includes(`${label}="${value}"`))) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

async function scrape(url: string): Promise<string> {
  return (await fetch(`${url}/metrics`)).text();
}

/** Waits until the ledger has counted `requests` answers (the hooks run a turn after each answer). */
async function answersCounted(url: string, requests: number): Promise<string> {
  for (let attempt = 0; attempt < 500; attempt++) {
    const text = await scrape(url);
    if (total(text, 'compactor_forwarded_prompt_tokens_total') > 0 && total(text, 'compactor_requests_total', { route: 'chat' }) >= requests) {
      const state = (await (await fetch(`${url}/dashboard/state`)).json()) as { totals: { requests: number } };
      if (state.totals.requests >= requests) return text;
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`expected ${requests} answers counted`);
}

describe('the server-seconds ledger (issue 36)', () => {
  it('names every family with its labels before any traffic', async () => {
    const upstream = opened(await FakeUpstream.start());
    new SimulatedLlama(upstream, { window: 8192 });
    const proxy = opened(await startProxy(upstream, { listen: true }));
    const text = await scrape(proxy.url);
    for (const kind of ['prefill', 'decode']) for (const call of ['main', 'summary']) expect(text).toContain(`compactor_upstream_seconds_total{kind="${kind}",call="${call}"} 0`);
    for (const cause of ['client', 'compression', 'summary', 'truncation', 'prune', 'repair', 'slot', 'server']) {
      expect(text).toContain(`compactor_prefix_breaks_total{cause="${cause}"} 0`);
      expect(text).toContain(`compactor_prefix_tokens_recomputed_total{cause="${cause}"} 0`);
    }
    expect(text).toContain('# TYPE compactor_server_tokens_per_second gauge');
  });

  it('counts server seconds, learns the speeds and names a client’s edit as its break', async () => {
    const upstream = opened(await FakeUpstream.start());
    const llama = new SimulatedLlama(upstream, { window: 8192 });
    const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true } } }));
    const post = async (messages: unknown[]): Promise<void> => {
      const answer = await fetch(`${proxy.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'sim', messages }) });
      expect(answer.status).toBe(200);
      await answer.text();
    };
    const system = { role: 'system', content: 'You are a careful coding agent. '.repeat(20) };
    const turn1 = [{ role: 'user', content: 'read the notes '.repeat(40) }, { role: 'assistant', content: 'Done.' }];
    await post([system, turn1[0]]);
    await post([system, ...turn1, { role: 'user', content: 'and now the tests' }]);
    // The client rewrites its first answer: its own break, at index 2.
    await post([system, turn1[0], { role: 'assistant', content: 'Done, and more.' }, { role: 'user', content: 'and now the tests' }, { role: 'assistant', content: 'Done.' }, { role: 'user', content: 'next' }]);
    const text = await answersCounted(proxy.url, 3);

    const chats = llama.chatRecords;
    const prefill = chats.reduce((sum, record) => sum + (record.promptTokens - record.cacheTokens) / SIMULATED_SPEEDS.prefill, 0);
    const decode = chats.reduce((sum, record) => sum + record.completionTokens / SIMULATED_SPEEDS.decode, 0);
    expect(total(text, 'compactor_upstream_seconds_total', { kind: 'prefill', call: 'main' })).toBeCloseTo(prefill, 6);
    expect(total(text, 'compactor_upstream_seconds_total', { kind: 'decode', call: 'main' })).toBeCloseTo(decode, 6);
    expect(total(text, 'compactor_prefix_breaks_total', { cause: 'client' })).toBe(1);
    expect(total(text, 'compactor_prefix_tokens_recomputed_total', { cause: 'client' })).toBeGreaterThan(0);
    for (const cause of ['compression', 'summary', 'truncation', 'prune', 'repair', 'slot', 'server']) expect(total(text, 'compactor_prefix_breaks_total', { cause })).toBe(0);
    expect(total(text, 'compactor_server_tokens_per_second', { model: 'sim', kind: 'prefill' })).toBeCloseTo(SIMULATED_SPEEDS.prefill, 3);
    expect(total(text, 'compactor_server_tokens_per_second', { model: 'sim', kind: 'decode' })).toBeCloseTo(SIMULATED_SPEEDS.decode, 3);

    // The log line carries the answer's own timings.
    const line = await proxy.logs.request((entry) => entry['route'] === 'chat');
    expect(line['prefillMs']).toBeCloseTo(((chats.at(-1)!.promptTokens - chats.at(-1)!.cacheTokens) * 1000) / SIMULATED_SPEEDS.prefill, 1);
    expect(line['decodeMs']).toBeCloseTo((chats.at(-1)!.completionTokens * 1000) / SIMULATED_SPEEDS.decode, 1);

    // The dashboard: the conversation's seconds and its break, the learned speeds.
    const state = (await (await fetch(`${proxy.url}/dashboard/state`)).json()) as {
      conversations: Array<{ server: { prefill: number; decode: number; reprocess: number }; breaks: Array<{ cause: string; index: number }> }>;
      speeds: Array<{ model: string; prefill: number; decode: number }>;
      server: { prefill: number };
    };
    expect(state.conversations).toHaveLength(1);
    expect(state.conversations[0]!.breaks).toMatchObject([{ cause: 'client', index: 2 }]);
    expect(state.conversations[0]!.server.prefill).toBeCloseTo(prefill, 6);
    expect(state.conversations[0]!.server.reprocess).toBe(0);
    expect(state.server.prefill).toBeCloseTo(prefill, 6);
    expect(state.speeds).toMatchObject([{ model: 'sim' }]);
  });

  it('counts summaries as call="summary" and the re-reading after them as compactor’s', async () => {
    const upstream = opened(await FakeUpstream.start());
    const llama = new SimulatedLlama(upstream, { window: 8192 });
    const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true } } }));
    const exchanges = await runAgent({ baseUrl: proxy.url, turns: 12, stepsPerTurn: 2, resultBytes: 1500, tools: AGENT_TOOLS, stream: true });
    expect(exchanges.every((exchange) => exchange.status === 200)).toBe(true);
    const text = await answersCounted(proxy.url, exchanges.length);
    const summaries = llama.summaryRecords.filter((record) => record.status === 200);
    expect(summaries.length).toBeGreaterThan(0);
    const decode = summaries.reduce((sum, record) => sum + record.completionTokens / SIMULATED_SPEEDS.decode, 0);
    expect(total(text, 'compactor_upstream_seconds_total', { kind: 'decode', call: 'summary' })).toBeCloseTo(decode, 6);
    // Every summary applied moved the prefix from its summary pair on.
    expect(total(text, 'compactor_prefix_breaks_total', { cause: 'summary' })).toBeGreaterThan(0);
    expect(total(text, 'compactor_prefix_tokens_recomputed_total', { cause: 'summary' })).toBeGreaterThan(0);
    expect(total(text, 'compactor_prefix_breaks_total', { cause: 'client' })).toBe(0);
    const state = (await (await fetch(`${proxy.url}/dashboard/state`)).json()) as {
      conversations: Array<{ server: { reprocess: number } }>;
      totals: { summarySeconds: { decode: number; calls: number } };
    };
    expect(state.conversations[0]!.server.reprocess).toBeGreaterThan(0);
    expect(state.totals.summarySeconds.calls).toBe(summaries.length);
  });
});
