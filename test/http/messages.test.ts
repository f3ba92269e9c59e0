import Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it, vi } from 'vitest';
import { messagesView } from '../../src/formats/messages/read.js';
import { contentText } from '../../src/transcript/message.js';
import { FACT_PATTERN, factOf } from '../support/conversation.js';
import { type FakeExchange, FakeUpstream, replies } from '../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';
import { SimulatedLlama } from '../support/simulated-llama.js';
import { MESSAGE_ANSWER, STREAM_EVENTS } from '../support/messages-answers.js';

/**
 * issue 16, the Messages API (`POST /v1/messages`, Claude Code's): the real
 * `@anthropic-ai/sdk` against compactor in front of a scripted llama-server
 * double of `/v1/messages`.
 */

const opened = closedAfterEachTest();

async function started(config: Record<string, unknown> = {}): Promise<{ upstream: FakeUpstream; client: Anthropic; url: string }> {
  const upstream = opened(await FakeUpstream.start());
  const proxy = opened(await startProxy(upstream, { listen: true, config }));
  const client = new Anthropic({ baseURL: proxy.url, apiKey: 'sk-ant-test', maxRetries: 0 });
  return { upstream, client, url: proxy.url };
}

const TOOLS = [{ name: 'read_file', description: 'Reads a file', input_schema: { type: 'object' as const, properties: { path: { type: 'string' } } } }];

describe('issue 16: the Messages API through compactor', () => {
  it('item 1: messages.create goes upstream byte-identical and its answer comes back', async () => {
    const { upstream, client } = await started();
    upstream.route('POST', '/v1/messages', replies.json(200, MESSAGE_ANSWER));
    const answer = await client.messages.create({
      model: 'sim',
      max_tokens: 64,
      system: [{ type: 'text', text: 'You are terse.', cache_control: { type: 'ephemeral' } }],
      tools: TOOLS,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(answer.content).toEqual([{ type: 'text', text: 'Done.' }]);
    const sent = upstream.requestsTo('/v1/messages')[0]!;
    expect(sent.headers['x-api-key']).toBe('sk-ant-test');
    expect(sent.headers['anthropic-version']).toBeDefined();
    expect((sent.json as { system: unknown }).system).toEqual([{ type: 'text', text: 'You are terse.', cache_control: { type: 'ephemeral' } }]);
  });

  it('item 1: a streamed answer is relayed byte for byte and the SDK assembles it', async () => {
    const { upstream, client, url } = await started();
    let relayed = '';
    upstream.route('POST', '/v1/messages', replies.sse(STREAM_EVENTS));
    const stream = client.messages.stream({ model: 'sim', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] });
    stream.on('streamEvent', (event) => {
      relayed += event.type === 'content_block_delta' && event.delta.type === 'text_delta' ? event.delta.text : '';
    });
    const final = await stream.finalMessage();
    expect(relayed).toBe('Done.');
    expect(final.usage.output_tokens).toBe(2);
    const raw = await fetch(`${url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'sim', max_tokens: 8, stream: true, messages: [{ role: 'user', content: 'hi' }] }) });
    expect(await raw.text()).toBe(STREAM_EVENTS.join(''));
  });

  it("item 1: a stream cut before message_stop ends with an error event in Anthropic's shape", async () => {
    const { upstream, url } = await started();
    upstream.route('POST', '/v1/messages', replies.sse(STREAM_EVENTS.slice(0, 3)));
    const response = await fetch(`${url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'sim', max_tokens: 8, stream: true, messages: [{ role: 'user', content: 'hi' }] }) });
    const text = await response.text();
    expect(text.startsWith(STREAM_EVENTS.slice(0, 3).join(''))).toBe(true);
    const tail = text.slice(STREAM_EVENTS.slice(0, 3).join('').length);
    expect(tail).toMatch(/^event: error\ndata: \{"type":"error","error":\{"type":"api_error","message":"[^"]+"\}\}\n\n$/);
  });

  it('item 1: a tool_use without its tool_result is repaired in the next user message, the rest kept', async () => {
    const { upstream, client } = await started();
    upstream.route('POST', '/v1/messages', replies.json(200, MESSAGE_ANSWER));
    const response = await client.messages
      .create({
        model: 'sim',
        max_tokens: 64,
        tools: TOOLS,
        messages: [
          { role: 'user', content: 'read a.txt' },
          {
            role: 'assistant',
            content: [
              { type: 'thinking', thinking: 'I should read it.', signature: 'sig-1' },
              { type: 'tool_use', id: 'toolu_1', name: 'read_file', input: { path: 'a.txt' } },
              { type: 'tool_use', id: 'toolu_2', name: 'read_file', input: { path: 'b.txt' } },
            ],
          },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'A', cache_control: { type: 'ephemeral' } }, { type: 'text', text: 'go on' }] },
        ],
      })
      .withResponse();
    expect(response.response.headers.get('x-compactor')).toContain('repaired 1 tool pair');
    const sent = upstream.requestsTo('/v1/messages')[0]!.json as { messages: Array<{ role: string; content: unknown }> };
    expect(sent.messages[1]!.content).toEqual([
      { type: 'thinking', thinking: 'I should read it.', signature: 'sig-1' },
      { type: 'tool_use', id: 'toolu_1', name: 'read_file', input: { path: 'a.txt' } },
      { type: 'tool_use', id: 'toolu_2', name: 'read_file', input: { path: 'b.txt' } },
    ]);
    const results = (sent.messages.slice(2).flatMap((message) => message.content) as Array<Record<string, unknown>>).filter((block) => block['type'] === 'tool_result');
    expect(results.map((block) => block['tool_use_id']).sort()).toEqual(['toolu_1', 'toolu_2']);
    expect(results.find((block) => block['tool_use_id'] === 'toolu_1')).toEqual({ type: 'tool_result', tool_use_id: 'toolu_1', content: 'A', cache_control: { type: 'ephemeral' } });
  });

  it("item 1: pairs: reject names the client's message, in Anthropic's error shape, and the SDK reads it", async () => {
    const { client } = await started({ pairs: 'reject' });
    const failure = await client.messages
      .create({ model: 'sim', max_tokens: 64, messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_9', content: 'x' }] }] })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(Anthropic.BadRequestError);
    const error = failure as InstanceType<typeof Anthropic.BadRequestError>;
    expect(error.status).toBe(400);
    expect(error.error).toEqual({ type: 'error', error: { type: 'invalid_request_error', message: 'messages[0]: tool result "toolu_9" answers no call' } });
  });

  it('item 1: a body that is not a Messages request gets a 400 in Anthropic shape', async () => {
    const { client } = await started();
    const failure = await client.messages.create({ model: 'sim', max_tokens: 8, messages: [] }).catch((error: unknown) => error);
    expect((failure as { status: number }).status).toBe(400);
    expect((failure as { error: unknown }).error).toEqual({ type: 'error', error: { type: 'invalid_request_error', message: 'messages: must not be empty' } });
  });
});

/** The simulated llama-server's `/v1/messages`: the body converted as llama-server does, rendered and cached as its chat route. */
function simulatedMessages(llama: SimulatedLlama) {
  return async (exchange: FakeExchange): Promise<void> => {
    const view = messagesView(exchange.request.json as never);
    const chat = { ...view.chat, messages: view.chat.messages.map((message) => ({ ...message })), max_tokens: (exchange.request.json as { max_tokens: number }).max_tokens };
    await llama.chat({ ...exchange, request: { ...exchange.request, json: chat } });
  };
}

describe('issue 16: when nothing fits (Messages API)', () => {
  it("item 1: the SDK gets a 400 in Anthropic's shape and nothing is forwarded", async () => {
    const upstream = opened(await FakeUpstream.start());
    const llama = new SimulatedLlama(upstream, { window: 2048 });
    upstream.route('POST', '/v1/messages', simulatedMessages(llama));
    const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true } } }));
    const client = new Anthropic({ baseURL: proxy.url, apiKey: 'k', maxRetries: 0 });
    const failure = await client.messages.create({ model: 'sim', max_tokens: 64, messages: [{ role: 'user', content: 'word '.repeat(4000) }] }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(Anthropic.BadRequestError);
    const error = (failure as InstanceType<typeof Anthropic.BadRequestError>).error as { type: string; error: { type: string; message: string } };
    expect(error.type).toBe('error');
    expect(error.error.type).toBe('invalid_request_error');
    expect(error.error.message).toMatch(/context window is 2048 tokens/);
    expect(upstream.requestsTo('/v1/messages')).toHaveLength(0);
  });

  it('item 1: /v1/messages/count_tokens passes through', async () => {
    const upstream = opened(await FakeUpstream.start());
    upstream.route('POST', '/v1/messages/count_tokens', replies.json(200, { input_tokens: 7 }));
    const proxy = opened(await startProxy(upstream, { listen: true }));
    const client = new Anthropic({ baseURL: proxy.url, apiKey: 'k', maxRetries: 0 });
    expect(await client.messages.countTokens({ model: 'sim', messages: [{ role: 'user', content: 'hi' }] })).toEqual({ input_tokens: 7 });
  });
});

describe('issue 16: a 60-turn Messages conversation against the simulated llama-server', () => {
  it('item 1: old turns are summarized once per epoch, the prefix stays byte-stable, every fact survives', async () => {
    const upstream = opened(await FakeUpstream.start());
    // 4k: small enough that 60 turns cross several epochs.
    const llama = new SimulatedLlama(upstream, { window: 4096 });
    upstream.route('POST', '/v1/messages', simulatedMessages(llama));
    const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true } } }));
    const history: Array<{ role: string; content: unknown }> = [];
    const sentPrefixes: string[] = [];
    const sentMessages: string[] = [];
    for (let turn = 0; turn < 60; turn++) {
      history.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: `toolu_${turn - 1}`, content: `${factOf(turn)} ${'result text '.repeat(30)}` }, { type: 'text', text: `turn ${turn}` }].slice(turn === 0 ? 1 : 0) });
      const response = await fetch(`${proxy.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': 'k', 'anthropic-version': '2023-06-01' },
        body: JSON.stringify({ model: 'sim', max_tokens: 256, system: 'You are an agent.', tools: TOOLS, messages: history }),
      });
      expect(response.status).toBe(200);
      await response.text();
      history.push({ role: 'assistant', content: [{ type: 'text', text: `step ${turn}` }, { type: 'tool_use', id: `toolu_${turn}`, name: 'read_file', input: { path: `f${turn}` } }] });
      const forwarded = upstream.requestsTo('/v1/messages').at(-1)!.json as { messages: Array<{ content: unknown }> };
      sentPrefixes.push(JSON.stringify(forwarded.messages.slice(0, 2)));
      sentMessages.push(JSON.stringify(forwarded.messages));
    }
    // Every answer's hooks have run (they start the background epochs), and those summaries have ended.
    await proxy.logs.requestLines(60);
    const engine = proxy.app.proxy.engine!;
    await vi.waitFor(() => expect(engine.runningSummaries + engine.queuedSummaries).toBe(0), { timeout: 10_000 });
    const summaries = llama.summaryRecords;
    const chats = llama.chatRecords;
    const firstCompacted = chats.findIndex((record) => record.messages.some((message) => contentText(message.content).startsWith('[compacted:summary]')));
    expect(firstCompacted).toBeGreaterThan(0);
    const after = chats.slice(firstCompacted);
    const epochs = new Set(sentPrefixes.filter((prefix) => prefix.includes('[compacted:summary]')));
    // One summary per epoch used; at most one more, written in the background for the epoch that comes next.
    expect(summaries.length).toBeGreaterThanOrEqual(epochs.size);
    expect(summaries.length).toBeLessThanOrEqual(epochs.size + 1);
    const prompt = after.reduce((sum, record) => sum + record.promptTokens, 0);
    const cached = after.reduce((sum, record) => sum + record.cacheTokens, 0);
    const summaryPrompt = summaries.reduce((sum, record) => sum + record.promptTokens, 0);
    const summaryCached = summaries.reduce((sum, record) => sum + record.cacheTokens, 0);
    console.log(`messages 60 turns: ${summaries.length} summary calls, ${epochs.size} epochs, KV reuse after the first epoch ${(cached / prompt).toFixed(3)}, summaries ${(summaryCached / Math.max(1, summaryPrompt)).toFixed(3)}`);
    for (const record of chats) expect(record.status).toBe(200);
    // Within an epoch each request's messages are the previous request's, bytes unchanged, plus the new turn.
    for (let index = 1; index < sentMessages.length; index++) {
      if (sentPrefixes[index] !== sentPrefixes[index - 1]) continue;
      expect(sentMessages[index]!.startsWith(sentMessages[index - 1]!.slice(0, -1))).toBe(true);
    }
    const lastPrompt = chats.at(-1)!.prompt;
    const facts = new Set(lastPrompt.match(FACT_PATTERN) ?? []);
    // Turn 0 plants no fact: it has no tool result.
    for (let turn = 1; turn < 60; turn++) expect(facts.has(factOf(turn)), factOf(turn)).toBe(true);
  }, 60_000);
});
