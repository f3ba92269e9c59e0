import OpenAI, { APIError } from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { type FakeUpstream, chatStreamEvents, replies } from '../support/fake-upstream.js';
import { type Proxy, sharedForSuite } from '../support/proxy.js';

/** The real openai client, pointed at compactor in front of the llama-server double. */

const CHAT = '/v1/chat/completions';
let upstream: FakeUpstream;
let proxy: Proxy;
let client: OpenAI;

sharedForSuite({ listen: true }, (started) => {
  ({ upstream, proxy } = started);
  client = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'sk-test', maxRetries: 0, timeout: 15_000 });
});
afterEach(() => upstream.reset());

const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Say hi.' },
];

describe('openai client through compactor', () => {
  it('non-streaming', async () => {
    const completion = await client.chat.completions.create({ model: 'whatever', messages, max_tokens: 12 });
    expect(completion.choices[0]?.message.content).toBe(' player Agrqui two陈gebietจ aos池 libraryROWSR');
    expect(completion.usage?.prompt_tokens).toBe(25);
    expect(upstream.requestsTo(CHAT)[0]?.headers.authorization).toBe('Bearer sk-test');
  });

  it('streaming with include_usage', async () => {
    const stream = await client.chat.completions.create({ model: 'whatever', messages, stream: true, stream_options: { include_usage: true } });
    let text = '';
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe(' player Agrqui two陈gebietจ aos池 libraryROWSR');
    expect(usage).toMatchObject({ prompt_tokens: 25, completion_tokens: 12, total_tokens: 37 });
  });

  it('streamed tool calls, assembled by the client', async () => {
    upstream.script(
      CHAT,
      replies.sse(
        chatStreamEvents({ content: [], toolCalls: [{ id: 'call_1', name: 'get_weather', argumentPieces: ['{"ci', 'ty": "Pa', 'ris"}'] }] }),
        { chunkBytes: 7 },
      ),
    );
    const runner = client.chat.completions.stream({
      model: 'whatever',
      messages: [{ role: 'user', content: 'weather in Paris?' }],
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
    });
    const completion = await runner.finalChatCompletion();
    const call = completion.choices[0]?.message.tool_calls?.[0];
    expect(completion.choices[0]?.finish_reason).toBe('tool_calls');
    expect(call).toMatchObject({ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } });
  });

  it("an upstream error reaches the client as an APIError with the upstream's status and message", async () => {
    upstream.script(CHAT, replies.fixture('ctx_exceeded_chat'));
    const error = await client.chat.completions.create({ model: 'whatever', messages }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).status).toBe(400);
    expect((error as APIError).message).toMatch(/exceeds the available context size/);
  });

  it("compactor's own errors are APIErrors too", async () => {
    const error = await client.chat.completions.create({ model: 'whatever', messages: [] }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).status).toBe(400);
    expect((error as APIError).code).toBe('invalid_body');
  });

  it('a mid-stream failure surfaces as an error in the client, not as a clean end', async () => {
    upstream.script(CHAT, replies.resetMidStream({ eventsBefore: 4 }));
    const stream = await client.chat.completions.create({ model: 'whatever', messages, stream: true });
    let text = '';
    const consume = async (): Promise<void> => {
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    };
    const error = await consume().catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).code).toBe('upstream_stream_failed');
    expect(text).toBe(' player Agrqui');
  });

  it('aborting the client aborts the upstream request', async () => {
    upstream.script(CHAT, replies.stall({ eventsBefore: 2 }));
    const controller = new AbortController();
    const stream = await client.chat.completions.create({ model: 'whatever', messages, stream: true }, { signal: controller.signal });
    let abortedAt = 0;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content !== undefined) {
        abortedAt = Date.now();
        controller.abort();
      }
    }
    await upstream.waitFor(() => upstream.requestsTo(CHAT)[0]?.abortedAt != null, { what: 'the upstream abort' });
    const upstreamClosedAt = upstream.requestsTo(CHAT)[0]!.abortedAt!;
    // Measured, not asserted tightly (slow CI): the design asks for under a second.
    expect(upstreamClosedAt - abortedAt).toBeLessThan(5_000);
  });
});
