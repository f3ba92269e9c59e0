import { describe, expect, it } from 'vitest';
import { FakeUpstream } from '../support/fake-upstream.js';
import { send, postJson } from '../support/http-client.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';
import { SimulatedLlama } from '../support/simulated-llama.js';
import { AGENT_TOOLS, runAgent } from '../e2e/agent-run.js';

/** `GET /metrics` (Prometheus, prom-client) and `GET /readyz` with the windows found. */

const opened = closedAfterEachTest();

/** The samples of a Prometheus text scrape, by `name{labels}` as written (labels in prom-client's order). */
function samples(text: string): Map<string, number> {
  const values = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    values.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return values;
}

/** The sum of the samples of `name` whose labels include every `label="value"` given. */
function total(values: Map<string, number>, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const [key, value] of values) {
    const brace = key.indexOf('{');
    if ((brace === -1 ? key : key.slice(0, brace)) !== name) continue;
    if (Object.entries(labels).every(([label, expected]) => key.includes(`${label}="${expected}"`))) sum += value;
  }
  return sum;
}

async function scrape(url: string): Promise<{ contentType: string | undefined; values: Map<string, number>; text: string }> {
  const answer = await send(`${url}/metrics`);
  expect(answer.status).toBe(200);
  const text = answer.body.toString('utf8');
  return { contentType: answer.headers['content-type'], values: samples(text), text };
}

describe('GET /metrics', () => {
  it('is Prometheus text with every documented family, and its counters move with traffic', async () => {
    const upstream = opened(await FakeUpstream.start());
    const llama = new SimulatedLlama(upstream, { window: 8192 });
    const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true } } }));

    const before = await scrape(proxy.url);
    expect(before.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    for (const family of [
      'compactor_requests_total',
      'compactor_upstream_response_seconds',
      'compactor_compactions_total',
      'compactor_compaction_tokens',
      'compactor_summary_duration_seconds',
      'compactor_summary_calls_total',
      'compactor_epoch_lookups_total',
      'compactor_epoch_cache_entries',
      'compactor_pair_repairs_total',
      'compactor_active_streams',
      'process_cpu_seconds_total',
      'nodejs_heap_size_used_bytes',
    ]) {
      expect(before.text).toContain(`# TYPE ${family} `);
    }
    expect(total(before.values, 'compactor_active_streams')).toBe(0);

    // Traffic: an agent conversation that outgrows the 8k window (streamed), one request with a broken pair, a pass-through call.
    const exchanges = await runAgent({ baseUrl: proxy.url, turns: 12, stepsPerTurn: 2, resultBytes: 1500, tools: AGENT_TOOLS, stream: true });
    expect(exchanges.every((exchange) => exchange.status === 200)).toBe(true);
    const repaired = await postJson(`${proxy.url}/v1/chat/completions`, {
      model: 'sim',
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'tool', tool_call_id: 'nobody', content: 'an orphan result' },
        { role: 'assistant', content: '', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'bash', arguments: '{}' } }] },
        { role: 'user', content: 'and a call left unanswered' },
      ],
    });
    expect(repaired.status).toBe(200);
    expect((await send(`${proxy.url}/v1/models`)).status).toBe(200);
    // The per-request counters move when the response has closed, a turn after the client has it.
    await new Promise((resolve) => setTimeout(resolve, 50));

    const after = await scrape(proxy.url);
    const values = after.values;
    expect(total(values, 'compactor_requests_total', { route: 'chat', status: '200' })).toBe(exchanges.length + 1);
    expect(total(values, 'compactor_requests_total', { route: 'passthrough', status: '200' })).toBe(1);
    expect(total(values, 'compactor_requests_total', { route: 'ops', status: '200' })).toBe(1); // the first scrape
    expect(total(values, 'compactor_upstream_response_seconds_count', { route: 'chat' })).toBe(exchanges.length + 1);

    const summaries = llama.summaryRecords.filter((record) => record.status === 200).length;
    expect(summaries).toBeGreaterThan(0);
    const summarized = total(values, 'compactor_compactions_total', { tier: 'summary' }) + total(values, 'compactor_compactions_total', { tier: 'steps' });
    expect(summarized).toBeGreaterThan(0);
    expect(total(values, 'compactor_compaction_tokens_count', { stage: 'before' })).toBe(total(values, 'compactor_compactions_total'));
    expect(total(values, 'compactor_compaction_tokens_sum', { stage: 'after' })).toBeLessThan(total(values, 'compactor_compaction_tokens_sum', { stage: 'before' }));
    expect(total(values, 'compactor_summary_duration_seconds_count', { outcome: 'ok' })).toBeGreaterThan(0);
    expect(total(values, 'compactor_summary_calls_total')).toBe(llama.summaryRecords.length);
    expect(total(values, 'compactor_epoch_lookups_total', { result: 'hit' })).toBeGreaterThan(0);
    expect(total(values, 'compactor_epoch_lookups_total', { result: 'miss' })).toBeGreaterThan(0);
    expect(total(values, 'compactor_epoch_cache_entries')).toBe(proxy.app.compactor.engine!.epochCount);
    expect(total(values, 'compactor_epoch_cache_entries')).toBeGreaterThan(0);
    expect(total(values, 'compactor_pair_repairs_total', { kind: 'orphan' })).toBe(1);
    expect(total(values, 'compactor_pair_repairs_total', { kind: 'missing' })).toBe(1);
    // Every stream has closed again.
    expect(total(values, 'compactor_active_streams')).toBe(0);
  });

  it('counts a stream as active while it is relayed', async () => {
    const upstream = opened(await FakeUpstream.start());
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => (release = resolve));
    upstream.route('POST', '/v1/chat/completions', async ({ response }) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write('data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n');
      await released;
      response.end('data: [DONE]\n\n');
    });
    const proxy = opened(await startProxy(upstream, { listen: true }));
    const streamed = postJson(`${proxy.url}/v1/chat/completions`, { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    await upstream.waitFor(() => upstream.requestsTo('/v1/chat/completions').length === 1);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(total((await scrape(proxy.url)).values, 'compactor_active_streams')).toBe(1);
    release();
    expect((await streamed).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(total((await scrape(proxy.url)).values, 'compactor_active_streams')).toBe(0);
  });

  it('keeps each app to its own registry: two apps in one process count apart', async () => {
    const upstream = opened(await FakeUpstream.start());
    new SimulatedLlama(upstream, { window: 8192 });
    const proxy = opened(await startProxy(upstream, { listen: true }));
    const other = await startProxy(upstream, { listen: true });
    try {
      await postJson(`${proxy.url}/v1/chat/completions`, { model: 'sim', messages: [{ role: 'user', content: 'hi' }] });
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(total((await scrape(proxy.url)).values, 'compactor_requests_total', { route: 'chat' })).toBe(1);
      expect(total((await scrape(other.url)).values, 'compactor_requests_total', { route: 'chat' })).toBe(0);
    } finally {
      await other.close();
    }
  });
});

describe('GET /readyz', () => {
  it('reports the context window found per model', async () => {
    const upstream = opened(await FakeUpstream.start());
    new SimulatedLlama(upstream, { window: 8192 });
    const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true }, models: { pinned: { context_window: 4096 } } } }));
    // Before any chat request: the upstream's first model is looked up.
    const fresh = await send(`${proxy.url}/readyz`);
    expect(fresh.status).toBe(200);
    expect(JSON.parse(fresh.body.toString())).toEqual({ status: 'ready', windows: { sim: 8192, pinned: 4096 } });
    await postJson(`${proxy.url}/v1/chat/completions`, { model: 'other', messages: [{ role: 'user', content: 'hi' }] });
    const later = JSON.parse((await send(`${proxy.url}/readyz`)).body.toString()) as { windows: Record<string, number> };
    expect(later.windows).toEqual({ sim: 8192, other: 8192, pinned: 4096 });
  });
});
