import { describe, expect, it, vi } from 'vitest';
import { Metrics } from '../../src/http/ops/metrics.js';
import { FakeUpstream, replies } from '../support/fake-upstream.js';
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

/** Compactions that made an epoch: the only ones with a size after them. */
function epochsMade(values: Map<string, number>): number {
  return ['compacted', 'prepared', 'truncated'].reduce((sum, outcome) => sum + total(values, 'compactor_compactions_total', { outcome }), 0);
}

/** Waits until the request counter has seen `count` chat requests (it moves a turn after the response closed). */
async function chatRequestsCounted(url: string, count: number): Promise<Map<string, number>> {
  for (let attempt = 0; attempt < 500; attempt++) {
    const values = (await scrape(url)).values;
    if (total(values, 'compactor_requests_total', { route: 'chat' }) >= count) return values;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`expected ${count} chat requests counted`);
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
      'compactor_summary_waits_total',
      'compactor_summary_wait_seconds',
      'compactor_epoch_lookups_total',
      'compactor_epoch_cache_entries',
      'compactor_epoch_cache_bytes',
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
    // The per-request counters move when the response has closed, a turn after the client has it (with its log line),
    // and a background summary an answer started counts when it ends.
    await proxy.logs.requestLines(exchanges.length + 2);
    await vi.waitFor(() => expect(proxy.app.proxy.engine!.runningSummaries).toBe(0), { timeout: 10_000 });

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
    expect(total(values, 'compactor_compaction_tokens_count', { stage: 'before' })).toBe(epochsMade(values));
    expect(total(values, 'compactor_compaction_tokens_sum', { stage: 'after' })).toBeLessThan(total(values, 'compactor_compaction_tokens_sum', { stage: 'before' }));
    expect(total(values, 'compactor_summary_duration_seconds_count', { outcome: 'ok' })).toBeGreaterThan(0);
    expect(total(values, 'compactor_summary_calls_total')).toBe(llama.summaryRecords.length);
    expect(total(values, 'compactor_summary_wait_seconds_count')).toBe(total(values, 'compactor_summary_waits_total'));
    expect(total(values, 'compactor_epoch_lookups_total', { result: 'hit' })).toBeGreaterThan(0);
    expect(total(values, 'compactor_epoch_lookups_total', { result: 'miss' })).toBeGreaterThan(0);
    expect(total(values, 'compactor_epoch_cache_entries')).toBe(proxy.app.proxy.engine!.epochCount);
    expect(total(values, 'compactor_epoch_cache_entries')).toBeGreaterThan(0);
    expect(total(values, 'compactor_epoch_cache_bytes')).toBe(proxy.app.proxy.engine!.epochBytes);
    expect(total(values, 'compactor_epoch_cache_bytes')).toBeGreaterThan(0);
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
    // The stream counts from its first relayed byte, which may still be on its way when the upstream has the request.
    await vi.waitFor(async () => expect(total((await scrape(proxy.url)).values, 'compactor_active_streams')).toBe(1), { timeout: 10_000 });
    release();
    expect((await streamed).status).toBe(200);
    await proxy.logs.requestLines(1);
    expect(total((await scrape(proxy.url)).values, 'compactor_active_streams')).toBe(0);
  });

  it('keeps each app to its own registry: two apps in one process count apart', async () => {
    const upstream = opened(await FakeUpstream.start());
    new SimulatedLlama(upstream, { window: 8192 });
    const proxy = opened(await startProxy(upstream, { listen: true }));
    const other = await startProxy(upstream, { listen: true });
    try {
      await postJson(`${proxy.url}/v1/chat/completions`, { model: 'sim', messages: [{ role: 'user', content: 'hi' }] });
      await proxy.logs.requestLines(1);
      expect(total((await scrape(proxy.url)).values, 'compactor_requests_total', { route: 'chat' })).toBe(1);
      expect(total((await scrape(other.url)).values, 'compactor_requests_total', { route: 'chat' })).toBe(0);
    } finally {
      await other.close();
    }
  });

  it('counts one failed summary once: requests in its back-off are no new compaction, and it has no size after', async () => {
    const upstream = opened(await FakeUpstream.start());
    const llama = new SimulatedLlama(upstream, { window: 8192 });
    llama.summaryFailures = 1_000;
    const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true } } }));
    // Not streamed, so that each request's report is in its x-compactor header.
    const exchanges = await runAgent({ baseUrl: proxy.url, turns: 20, stepsPerTurn: 2, resultBytes: 1500, tools: AGENT_TOOLS });
    const values = await chatRequestsCounted(proxy.url, exchanges.length);

    // One summary was tried (in the background, past the soft threshold) and failed; the back-off holds the rest.
    expect(total(values, 'compactor_summary_duration_seconds_count', { outcome: 'failed' })).toBe(1);
    expect(total(values, 'compactor_compactions_total', { outcome: 'failed' })).toBe(1);
    // Each time the conversation crossed the threshold it was truncated: one new epoch each, counted once.
    const truncations = new Set(exchanges.map((exchange) => exchange.report).filter((report) => report?.startsWith('truncated')));
    expect(total(values, 'compactor_compactions_total', { outcome: 'truncated' })).toBe(truncations.size);
    expect(truncations.size).toBeGreaterThan(0);
    // Sizes are recorded for epochs made, not for a failure (whose "after" was its "before").
    expect(total(values, 'compactor_compaction_tokens_count', { stage: 'after' })).toBe(epochsMade(values));
  });

  it('labels compactions and tokens by model, at most 64 models, the rest as "other"', async () => {
    const metrics = new Metrics();
    for (let index = 0; index < 70; index++) {
      metrics.compaction({ model: `model-${index}`, tier: 'prune', outcome: 'compacted', tokensBefore: 2000, tokensAfter: 1000, pending: false });
      metrics.promptTokens({ model: `model-${index}`, sent: 200, forwarded: 100, cached: 50 });
    }
    const values = samples(await metrics.text());
    const models = (name: string): Set<string> =>
      new Set([...values.keys()].filter((key) => key.startsWith(`${name}{`)).map((key) => /model="([^"]*)"/.exec(key)?.[1] ?? ''));
    for (const name of ['compactor_compactions_total', 'compactor_client_prompt_tokens_total', 'compactor_forwarded_prompt_tokens_total', 'compactor_cached_prompt_tokens_total']) {
      expect(models(name).size).toBe(65);
      expect(models(name).has('other')).toBe(true);
      expect(models(name).has('model-63')).toBe(true);
      expect(models(name).has('model-64')).toBe(false);
    }
    expect(total(values, 'compactor_compactions_total', { model: 'other' })).toBe(6);
    expect(total(values, 'compactor_client_prompt_tokens_total')).toBe(70 * 200);
    expect(total(values, 'compactor_forwarded_prompt_tokens_total', { model: 'other' })).toBe(6 * 100);
  });

  it('counts the prompt tokens sent, forwarded and served from the upstream cache, and each request whole', async () => {
    const upstream = opened(await FakeUpstream.start());
    const llama = new SimulatedLlama(upstream, { window: 8192 });
    const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true } } }));
    // Streamed without usage (llama-server's timings say it), streamed with usage, and JSON (usage.prompt_tokens_details).
    const half = await runAgent({ baseUrl: proxy.url, turns: 4, stepsPerTurn: 2, resultBytes: 1500, tools: AGENT_TOOLS, stream: true });
    const rest = await runAgent({ baseUrl: proxy.url, turns: 12, stepsPerTurn: 2, resultBytes: 1500, tools: AGENT_TOOLS });
    const requests = half.length + rest.length;
    const values = await chatRequestsCounted(proxy.url, requests);

    const answered = llama.chatRecords.filter((record) => record.status === 200);
    expect(answered).toHaveLength(requests);
    const forwarded = answered.reduce((sum, record) => sum + record.promptTokens, 0);
    const cached = answered.reduce((sum, record) => sum + record.cacheTokens, 0);
    expect(total(values, 'compactor_forwarded_prompt_tokens_total', { model: 'sim' })).toBe(forwarded);
    expect(total(values, 'compactor_cached_prompt_tokens_total', { model: 'sim' })).toBe(cached);
    expect(cached).toBeGreaterThan(0);
    // Compaction made the forwarded prompts smaller than what the client sent.
    expect(rest.some((exchange) => exchange.report !== null)).toBe(true);
    expect(total(values, 'compactor_client_prompt_tokens_total', { model: 'sim' })).toBeGreaterThan(forwarded);
    // Start to last byte: one observation per request, each at least as long as the wait for the upstream.
    expect(total(values, 'compactor_request_duration_seconds_count', { route: 'chat' })).toBe(requests);
    expect(total(values, 'compactor_request_duration_seconds_sum', { route: 'chat' })).toBeGreaterThanOrEqual(
      total(values, 'compactor_upstream_response_seconds_sum', { route: 'chat' }),
    );
  });

  it("counts the upstream's context-exceeded refusals, llama-server's and OpenAI's", async () => {
    const upstream = opened(await FakeUpstream.start());
    const proxy = opened(await startProxy(upstream, { listen: true }));
    const chat = { model: 'small', messages: [{ role: 'user', content: 'hi' }] };
    upstream.script('/v1/chat/completions', replies.fixture('ctx_exceeded_chat'), replies.fixture('ctx_exceeded_chat_stream'));
    expect((await postJson(`${proxy.url}/v1/chat/completions`, chat)).status).toBe(400);
    expect((await postJson(`${proxy.url}/v1/chat/completions`, { ...chat, stream: true })).status).toBe(400);
    upstream.script(
      '/v1/chat/completions',
      replies.json(400, { error: { message: 'too long', type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' } }),
      replies.json(400, { error: { message: 'bad temperature', type: 'invalid_request_error', param: 'temperature', code: null } }),
    );
    expect((await postJson(`${proxy.url}/v1/chat/completions`, { ...chat, model: 'gpt' })).status).toBe(400);
    expect((await postJson(`${proxy.url}/v1/chat/completions`, chat)).status).toBe(400);
    const values = await chatRequestsCounted(proxy.url, 4);
    expect(total(values, 'compactor_upstream_context_exceeded_total', { model: 'small' })).toBe(2);
    expect(total(values, 'compactor_upstream_context_exceeded_total', { model: 'gpt' })).toBe(1);
  });

  it('counts a stream that ended in an error event with the error status, not 200', async () => {
    const upstream = opened(await FakeUpstream.start());
    const proxy = opened(await startProxy(upstream, { listen: true }));
    const chat = { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] };
    // The upstream's own `data: {"error":{"code":500,…}}`, then a connection reset (compactor writes the error event).
    upstream.script('/v1/chat/completions', replies.fixture('chat_stream_midstream_error'), replies.resetMidStream());
    const upstreamError = await postJson(`${proxy.url}/v1/chat/completions`, chat);
    expect(upstreamError.status).toBe(200);
    expect(upstreamError.body.toString()).toContain('data: {"error"');
    const broken = await postJson(`${proxy.url}/v1/chat/completions`, chat);
    expect(broken.body.toString()).toContain('upstream_stream_failed');
    const values = await chatRequestsCounted(proxy.url, 2);
    expect(total(values, 'compactor_requests_total', { route: 'chat', status: '200' })).toBe(0);
    expect(total(values, 'compactor_requests_total', { route: 'chat', status: '500' })).toBe(1);
    expect(total(values, 'compactor_requests_total', { route: 'chat', status: '502' })).toBe(1);
    const lines = proxy.logs.requests();
    expect(lines.map((line) => [line['status'], line['sentStatus'], line['error']])).toEqual([
      [500, 200, 'upstream_error'],
      [502, 200, 'upstream_stream_failed'],
    ]);
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
