import OpenAI from 'openai';
import { describe, expect, it, vi } from 'vitest';
import { responsesView } from '../../src/formats/responses/read.js';
import { contentText } from '../../src/transcript/message.js';
import { FACT_PATTERN, factOf } from '../support/conversation.js';
import { type FakeExchange, FakeUpstream, replies } from '../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';
import { SimulatedLlama } from '../support/simulated-llama.js';
import { RESPONSE, STREAM_EVENTS } from '../support/responses-answer.js';

/**
 * issue 16, the Responses API (`POST /v1/responses`, Codex CLI's): the real
 * `openai` SDK's `responses.create` against compactor in front of a scripted
 * llama-server double of `/v1/responses`.
 */

const opened = closedAfterEachTest();

const TOOLS = [{ type: 'function' as const, name: 'shell', description: 'Runs a command', parameters: { type: 'object', properties: { command: { type: 'string' } } }, strict: false }];

async function started(config: Record<string, unknown> = {}): Promise<{ upstream: FakeUpstream; client: OpenAI; url: string }> {
  const upstream = opened(await FakeUpstream.start());
  const proxy = opened(await startProxy(upstream, { listen: true, config }));
  return { upstream, client: new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'sk-test', maxRetries: 0 }), url: proxy.url };
}

describe('issue 16: the Responses API through compactor', () => {
  it('item 2: responses.create with function calls goes upstream unchanged and its answer comes back', async () => {
    const { upstream, client } = await started();
    upstream.route('POST', '/v1/responses', replies.json(200, RESPONSE));
    const input = [
      { type: 'message' as const, role: 'user' as const, content: [{ type: 'input_text' as const, text: 'list files' }] },
      { type: 'reasoning' as const, id: 'rs_1', summary: [], encrypted_content: 'ENC' },
      { type: 'function_call' as const, call_id: 'call_1', name: 'shell', arguments: '{"command":"ls"}' },
      { type: 'function_call_output' as const, call_id: 'call_1', output: 'a.txt' },
    ];
    const answer = await client.responses.create({ model: 'sim', instructions: 'Be terse.', input, tools: TOOLS }).withResponse();
    expect(answer.data.output_text).toBe('Done.');
    expect(answer.response.headers.get('x-compactor')).toBeNull();
    expect((upstream.requestsTo('/v1/responses')[0]!.json as { input: unknown }).input).toEqual(input);
  });

  it('item 2: a streamed answer is relayed byte for byte and the SDK reads its events', async () => {
    const { upstream, client, url } = await started();
    upstream.route('POST', '/v1/responses', replies.sse(STREAM_EVENTS));
    const stream = await client.responses.create({ model: 'sim', input: 'hi', stream: true });
    const types: string[] = [];
    for await (const event of stream) types.push(event.type);
    expect(types).toEqual(['response.created', 'response.output_text.delta', 'response.output_text.delta', 'response.completed']);
    const raw = await fetch(`${url}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'sim', input: 'hi', stream: true }) });
    expect(await raw.text()).toBe(STREAM_EVENTS.join(''));
  });

  it('item 2: a function_call without its output is repaired, reasoning kept verbatim', async () => {
    const { upstream, client } = await started();
    upstream.route('POST', '/v1/responses', replies.json(200, RESPONSE));
    const answer = await client.responses
      .create({
        model: 'sim',
        input: [
          { type: 'message', role: 'user', content: 'list files' },
          { type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: 'ENC' },
          { type: 'function_call', call_id: 'call_1', name: 'shell', arguments: '{"command":"ls"}' },
          { type: 'function_call', call_id: 'call_2', name: 'shell', arguments: '{"command":"pwd"}' },
          { type: 'function_call_output', call_id: 'call_2', output: '/w' },
          { type: 'message', role: 'user', content: 'go on' },
        ],
        tools: TOOLS,
      })
      .withResponse();
    expect(answer.response.headers.get('x-compactor')).toContain('repaired 1 tool pair');
    const sent = (upstream.requestsTo('/v1/responses')[0]!.json as { input: Array<Record<string, unknown>> }).input;
    expect(sent[1]).toEqual({ type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: 'ENC' });
    const outputs = sent.filter((item) => item['type'] === 'function_call_output').map((item) => item['call_id']);
    expect(outputs.sort()).toEqual(['call_1', 'call_2']);
  });

  it('item 2: previous_response_id goes through untouched and the header says so', async () => {
    const { upstream, client } = await started({ pairs: 'reject' });
    upstream.route('POST', '/v1/responses', replies.json(200, RESPONSE));
    const answer = await client.responses
      .create({ model: 'sim', previous_response_id: 'resp_0', input: [{ type: 'function_call_output', call_id: 'call_9', output: 'x' }] })
      .withResponse();
    expect(answer.response.headers.get('x-compactor')).toContain('passed through: previous_response_id');
    expect(upstream.requestsTo('/v1/responses')).toHaveLength(1);
  });

  it("item 2: pairs: reject names the input item in OpenAI's error shape", async () => {
    const { client } = await started({ pairs: 'reject' });
    const failure = await client.responses.create({ model: 'sim', input: [{ type: 'function_call_output', call_id: 'call_9', output: 'x' }] }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(OpenAI.BadRequestError);
    expect((failure as InstanceType<typeof OpenAI.BadRequestError>).error).toMatchObject({ message: 'input[0]: tool result "call_9" answers no call', param: 'input[0]', code: 'invalid_tool_pairs' });
  });
});

/** The simulated llama-server's `/v1/responses`: the body converted to chat, rendered and cached as its chat route. */
function simulatedResponses(llama: SimulatedLlama) {
  return async (exchange: FakeExchange): Promise<void> => {
    const view = responsesView(exchange.request.json as never);
    const chat = { ...view.chat, messages: view.chat.messages.map((message) => ({ ...message })) };
    await llama.chat({ ...exchange, request: { ...exchange.request, json: chat } });
  };
}

describe('issue 16: when nothing fits (Responses API)', () => {
  it("item 2: the SDK gets a 400 in OpenAI's shape and nothing is forwarded", async () => {
    const upstream = opened(await FakeUpstream.start());
    const llama = new SimulatedLlama(upstream, { window: 2048 });
    upstream.route('POST', '/v1/responses', simulatedResponses(llama));
    const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true } } }));
    const client = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'k', maxRetries: 0 });
    const failure = await client.responses.create({ model: 'sim', input: 'word '.repeat(4000) }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(OpenAI.BadRequestError);
    const error = (failure as InstanceType<typeof OpenAI.BadRequestError>).error as { code: string; message: string };
    expect(error.code).toBe('context_length_exceeded');
    expect(error.message).toMatch(/context window is 2048 tokens/);
    expect(upstream.requestsTo('/v1/responses')).toHaveLength(0);
  });
});

describe('issue 16: a 60-turn Responses conversation against the simulated llama-server', () => {
  it('item 2: old turns are summarized once per epoch, the prefix stays byte-stable, every fact survives', async () => {
    const upstream = opened(await FakeUpstream.start());
    // 4k: small enough that 60 turns cross several epochs.
    const llama = new SimulatedLlama(upstream, { window: 4096 });
    upstream.route('POST', '/v1/responses', simulatedResponses(llama));
    const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true } } }));
    const input: Array<Record<string, unknown>> = [{ type: 'message', role: 'developer', content: 'Sandbox: workspace-write.' }];
    const sentInputs: string[] = [];
    for (let turn = 0; turn < 60; turn++) {
      if (turn > 0) input.push({ type: 'function_call_output', call_id: `call_${turn - 1}`, output: `${factOf(turn)} ${'output line '.repeat(30)}` });
      input.push({ type: 'message', role: 'user', content: [{ type: 'input_text', text: `turn ${turn}` }] });
      const response = await fetch(`${proxy.url}/v1/responses`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer k' },
        body: JSON.stringify({ model: 'sim', instructions: 'You are Codex.', tools: TOOLS, input, store: false }),
      });
      expect(response.status).toBe(200);
      await response.text();
      input.push({ type: 'reasoning', id: `rs_${turn}`, summary: [], encrypted_content: `ENC${turn}` }, { type: 'function_call', call_id: `call_${turn}`, name: 'shell', arguments: `{"command":"cat f${turn}"}` });
      sentInputs.push(JSON.stringify((upstream.requestsTo('/v1/responses').at(-1)!.json as { input: unknown }).input));
    }
    // Every answer's hooks have run (they start the background epochs), and those summaries have ended.
    await proxy.logs.requestLines(60);
    const engine = proxy.app.proxy.engine!;
    await vi.waitFor(() => expect(engine.runningSummaries + engine.queuedSummaries).toBe(0), { timeout: 10_000 });
    const summaries = llama.summaryRecords;
    const chats = llama.chatRecords;
    const firstCompacted = chats.findIndex((record) => record.messages.some((message) => contentText(message.content).startsWith('[compacted:summary]')));
    expect(firstCompacted).toBeGreaterThan(0);
    const summaryOf = (text: string): string => text.match(/\[compacted:summary\] NOTES[^"]*/)?.[0] ?? '';
    const epochs = new Set(sentInputs.map(summaryOf).filter((text) => text !== ''));
    // One summary per epoch used; at most one more, written in the background for the epoch that comes next.
    expect(summaries.length).toBeGreaterThanOrEqual(epochs.size);
    expect(summaries.length).toBeLessThanOrEqual(epochs.size + 1);
    for (let index = 1; index < sentInputs.length; index++) {
      if (summaryOf(sentInputs[index]!) !== summaryOf(sentInputs[index - 1]!)) continue;
      expect(sentInputs[index]!.startsWith(sentInputs[index - 1]!.slice(0, -1))).toBe(true);
    }
    const after = chats.slice(firstCompacted);
    const prompt = after.reduce((sum, record) => sum + record.promptTokens, 0);
    const cached = after.reduce((sum, record) => sum + record.cacheTokens, 0);
    const summaryPrompt = summaries.reduce((sum, record) => sum + record.promptTokens, 0);
    const summaryCached = summaries.reduce((sum, record) => sum + record.cacheTokens, 0);
    console.log(`responses 60 turns: ${summaries.length} summary calls, ${epochs.size} epochs, KV reuse after the first epoch ${(cached / prompt).toFixed(3)}, summaries ${(summaryCached / Math.max(1, summaryPrompt)).toFixed(3)}`);
    for (const record of chats) expect(record.status).toBe(200);
    const facts = new Set(chats.at(-1)!.prompt.match(FACT_PATTERN) ?? []);
    for (let turn = 1; turn < 60; turn++) expect(facts.has(factOf(turn)), factOf(turn)).toBe(true);
    // Reasoning items of kept turns went as they came.
    expect(sentInputs.at(-1)).toContain('"encrypted_content":"ENC58"');
  }, 60_000);
});
