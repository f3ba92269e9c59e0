import { describe, expect, it } from 'vitest';
import { ContextWindows } from '../../src/compaction/sizes/context-window.js';
import { UpstreamClient } from '../../src/upstream/client.js';
import { inspectUpstream } from '../../src/upstream/inspect.js';
import { upstreamJsonOf } from '../../src/upstream/json-surface.js';
import { isContextExceeded, refusedWindow } from '../../src/upstream/refusal.js';
import { conversation } from '../support/conversation.js';
import { FakeUpstream } from '../support/fake-upstream.js';
import { lmStudio, ollama, router, vllm } from '../support/local-servers.js';
import { closedAfterEachTest } from '../support/proxy.js';
import { SimulatedLlama } from '../support/simulated-llama.js';

/**
 * Issue 37: the window of every common local server, found from what that
 * server documents (the doubles in test/support/local-servers.ts cite their
 * pages), what it runs with taken over what the model could; and each
 * server's overflow answer read for the window it names.
 */

const TIMEOUTS = { connectMs: 1_000, headersMs: 5_000, idleMs: 5_000 };
const opened = closedAfterEachTest();

async function started(): Promise<{ upstream: FakeUpstream; client: UpstreamClient }> {
  const upstream = opened(await FakeUpstream.start());
  return { upstream, client: opened(new UpstreamClient({ url: upstream.url, timeouts: TIMEOUTS })) };
}

function windowsOf(json: UpstreamClient): ContextWindows {
  return new ContextWindows({ configured: () => 'auto', upstream: upstreamJsonOf(json, 5_000) });
}

/** A prompt of about 12k tokens, larger than every double's 4096. */
async function overflowAnswer(url: string, model: string): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: conversation({ turns: 24, resultBytes: 800 }), max_tokens: 1000 }),
  });
  return { status: response.status, body: await response.json() };
}

describe('llama-server (the recorded one)', () => {
  it('is named, with /props as the source of its window, and its refusal names n_ctx', async () => {
    const { upstream, client } = await started();
    new SimulatedLlama(upstream, { window: 4096 });
    expect(await inspectUpstream(client)).toMatchObject({ state: 'ready', kind: 'llama-server', models: [{ id: 'sim', window: 4096, source: '/props' }], truncatesSilently: false });
    const refusal = await overflowAnswer(upstream.url, 'sim');
    expect(refusal.status).toBe(400);
    expect(refusedWindow(refusal.body)).toBe(4096);
  });
});

describe('vLLM', () => {
  it("takes /v1/models' max_model_len as the window", async () => {
    const { upstream, client } = await started();
    vllm(upstream, { model: 'Qwen/Qwen3-8B', window: 4096, trained: 40_960 });
    expect(await inspectUpstream(client)).toMatchObject({ kind: 'vLLM', models: [{ id: 'Qwen/Qwen3-8B', window: 4096, source: '/v1/models max_model_len' }] });
    await expect(windowsOf(client).get('Qwen/Qwen3-8B')).resolves.toBe(4096);
  });

  it("reads its 400 \"This model's maximum context length is 4096 tokens. However, you requested …\" for 4096", async () => {
    const { upstream } = await started();
    vllm(upstream, { model: 'Qwen/Qwen3-8B', window: 4096, trained: 40_960 });
    const refusal = await overflowAnswer(upstream.url, 'Qwen/Qwen3-8B');
    expect(refusal.status).toBe(400);
    expect(isContextExceeded(refusal.body)).toBe(true);
    expect(refusedWindow(refusal.body)).toBe(4096);
    // vLLM before 0.6: the same ErrorResponse at the top level (vllm-project/vllm#4667).
    expect(refusedWindow({ object: 'error', message: "This model's maximum context length is 131072 tokens. However, you requested 351430 tokens.", type: 'BadRequestError', param: null, code: 400 })).toBe(131_072);
    // And the wording of `max_tokens` too large (vLLM ≥ 0.8).
    expect(refusedWindow({ error: { message: "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is 4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778).", type: 'BadRequestError', param: null, code: 400 } })).toBe(4096);
  });
});

describe('LM Studio', () => {
  it('takes loaded_context_length (what it runs with) over max_context_length (what the model could)', async () => {
    const { upstream, client } = await started();
    lmStudio(upstream, { model: 'qwen3-14b', window: 4096, trained: 32_768 });
    expect(await inspectUpstream(client)).toMatchObject({ kind: 'LM Studio', models: [{ id: 'qwen3-14b', window: 4096, source: '/api/v0/models loaded_context_length' }] });
    await expect(windowsOf(client).get('qwen3-14b')).resolves.toBe(4096);
  });

  it('says a model not loaded yet has only what it could, and its 400 names n_ctx', async () => {
    const { upstream, client } = await started();
    lmStudio(upstream, { model: 'qwen3-14b', window: 4096, trained: 32_768, loaded: false });
    expect(await inspectUpstream(client)).toMatchObject({ models: [{ window: 32_768, source: '/api/v0/models max_context_length (not loaded yet)' }] });
    const refusal = await overflowAnswer(upstream.url, 'qwen3-14b');
    expect(refusal.status).toBe(400);
    expect(refusedWindow(refusal.body)).toBe(4096);
    // Its former words (lmstudio-ai/lmstudio-bug-tracker#237).
    expect(refusedWindow({ error: 'Trying to keep the first 15857 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, which is not enough.' })).toBe(4096);
  });
});

describe('Ollama', () => {
  it("takes the loaded runner's context_length (/api/ps) over the model's, and says it truncates silently", async () => {
    const { upstream, client } = await started();
    ollama(upstream, { model: 'qwen3:latest', window: 4096, trained: 40_960 });
    expect(await inspectUpstream(client)).toMatchObject({ kind: 'Ollama', truncatesSilently: true, models: [{ id: 'qwen3:latest', window: 4096, source: '/api/ps context_length' }] });
    // A request naming the model without its tag is the same model.
    await expect(windowsOf(client).get('qwen3')).resolves.toBe(4096);
  });

  it("not loaded: the Modelfile's num_ctx, else Ollama's default 4096, never above the model's context_length", async () => {
    const first = await started();
    ollama(first.upstream, { model: 'qwen3:14b', window: 8192, trained: 40_960, loaded: false, numCtx: 8192 });
    expect(await inspectUpstream(first.client)).toMatchObject({ models: [{ window: 8192, source: '/api/show parameters num_ctx (not loaded yet)' }] });
    const second = await started();
    ollama(second.upstream, { model: 'tiny:latest', window: 4096, trained: 2048, loaded: false });
    expect(await inspectUpstream(second.client)).toMatchObject({ models: [{ window: 2048, source: expect.stringContaining("Ollama's default context") as unknown }] });
  });

  it('answers an over-long prompt 200, cut: the overflow it has no words for; its own API says "the input length exceeds the context length"', async () => {
    const { upstream } = await started();
    const llama = ollama(upstream, { model: 'qwen3:14b', window: 4096, trained: 40_960 });
    const answer = await overflowAnswer(upstream.url, 'qwen3:14b');
    expect(answer.status).toBe(200);
    expect(llama.truncated).toBe(1);
    expect(isContextExceeded({ error: 'the input length exceeds the context length' })).toBe(true);
    expect(refusedWindow({ error: 'the input length exceeds the context length' })).toBeNull();
    // Its runner's 400, passed on (ollama/ollama#17889; the wording of ggml-org/llama.cpp#19774).
    expect(refusedWindow({ error: 'request (4390 tokens) exceeds the available context size (4096 tokens), try increasing it' })).toBe(4096);
  });
});

describe("llama-server's router mode", () => {
  it('names each model by its own /props once loaded; one not loaded yet is asked again, and found once loaded on first use', async () => {
    const { upstream, client } = await started();
    router(upstream, { model: 'qwen3-8b', window: 8192, trained: 40_960 });
    expect(await inspectUpstream(client)).toMatchObject({ kind: 'llama-server router', models: [{ id: 'qwen3-8b', window: null, source: expect.stringContaining('loaded on first use') as unknown }] });
    const windows = windowsOf(client);
    await expect(windows.get('qwen3-8b')).resolves.toBeNull();
    const first = await fetch(`${upstream.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'qwen3-8b', messages: [{ role: 'user', content: 'hi' }] }) });
    await first.arrayBuffer();
    await expect(windows.get('qwen3-8b')).resolves.toBe(8192);
    expect(windows.found('qwen3-8b')).toMatchObject({ kind: 'llama-server router', source: '/props?model' });
    // Asking never loads a model: its /props is asked with autoload=false.
    const modelProps = upstream.requestsTo('/props').filter((request) => request.path.includes('model='));
    expect(modelProps.length).toBeGreaterThan(0);
    expect(modelProps.every((request) => request.path.includes('autoload=false'))).toBe(true);
  });

  it('reads an unloaded model\'s window from the args its instance starts with (-c over -np), and its refusal names n_ctx', async () => {
    const { upstream, client } = await started();
    router(upstream, { model: 'qwen3-8b', window: 4096, trained: 40_960, args: ['llama-server', '--ctx-size', '8192', '-np', '2'] });
    expect(await inspectUpstream(client)).toMatchObject({ models: [{ window: 4096, source: '/models status.args' }] });
    const refusal = await overflowAnswer(upstream.url, 'qwen3-8b');
    expect(refusedWindow(refusal.body)).toBe(4096);
  });
});

describe('anything else OpenAI-compatible', () => {
  it('is named so, with no window', async () => {
    const { upstream, client } = await started();
    upstream.route('GET', '/props', (exchange) => void exchange.response.writeHead(404).end());
    upstream.route('GET', '/v1/models', (exchange) => void exchange.response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data: [{ id: 'gpt-x', object: 'model', owned_by: 'someone' }] })));
    expect(await inspectUpstream(client)).toMatchObject({ kind: 'OpenAI-compatible', models: [{ id: 'gpt-x', window: null, source: 'not reported' }] });
  });
});

describe('the start log', () => {
  it('names the server and, for one that truncates silently, says so', async () => {
    const { logInspection } = await import('../../src/http/ops/start.js');
    const lines: Array<{ level: string; msg: string }> = [];
    const log = { info: (_: unknown, msg: string) => lines.push({ level: 'info', msg }), warn: (_: unknown, msg: string) => lines.push({ level: 'warn', msg }) };
    const { upstream, client } = await started();
    ollama(upstream, { model: 'qwen3:latest', window: 4096, trained: 40_960 });
    logInspection(log as never, upstream.url, await inspectUpstream(client));
    expect(lines[0]).toEqual({ level: 'info', msg: 'upstream ready: Ollama, 1 model(s)' });
    expect(lines[1]?.level).toBe('warn');
    expect(lines[1]?.msg).toMatch(/^Ollama cuts a prompt longer than the window it runs with without an error/);
  });
});
