import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { jsonSchema, streamText, tool } from 'ai';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { type FakeUpstream, chatStreamEvents, replies, type FakeReply } from '../support/fake-upstream.js';
import { type Proxy, sharedForSuite } from '../support/proxy.js';
import { spawnOwned } from '../support/child-processes.js';
import { SERVER_COMMENT } from '../support/sse.js';

/**
 * The clients people point at compactor, each run twice against the same
 * scripted llama-server double: once directly, once through the proxy (with
 * compaction on). What the client sees must be the same.
 */

const CHAT = '/v1/chat/completions';
let upstream: FakeUpstream;
let proxy: Proxy;

sharedForSuite({ listen: true, config: { compaction: { enabled: true } } }, (started) => {
  ({ upstream, proxy } = started);
});
afterEach(() => upstream.reset());

/** Runs `client` against the double directly, then through compactor, each time with `reply` (when given) answering the chat call. */
async function directAndProxied<T>(client: (baseUrl: string) => Promise<T>, reply?: FakeReply): Promise<{ direct: T; proxied: T }> {
  if (reply !== undefined) upstream.script(CHAT, reply);
  const direct = await client(upstream.url);
  if (reply !== undefined) upstream.script(CHAT, reply);
  const proxied = await client(proxy.url);
  // Both calls reached the double, the second one through compactor.
  expect(upstream.requestsTo(CHAT)).toHaveLength(2);
  expect(upstream.requestsTo(CHAT)[1]!.body.toString()).toBe(upstream.requestsTo(CHAT)[0]!.body.toString());
  return { direct, proxied };
}

const WEATHER_CALL = replies.sse(
  chatStreamEvents({ content: [], toolCalls: [{ id: 'call_1', name: 'get_weather', argumentPieces: ['{"ci', 'ty": "Pa', 'ris"}'] }] }),
  { chunkBytes: 7 },
);

describe('Vercel AI SDK (ai + @ai-sdk/openai-compatible)', () => {
  const provider = (baseUrl: string) =>
    createOpenAICompatible({ name: 'llama', baseURL: `${baseUrl}/v1`, apiKey: 'sk-test', includeUsage: true }).chatModel('whatever');

  /** What an application sees of a streamText run: the parts that carry content, without per-run ids. */
  async function run(baseUrl: string, withTools: boolean): Promise<unknown[]> {
    const result = streamText({
      model: provider(baseUrl),
      system: 'You are terse.',
      messages: [{ role: 'user', content: withTools ? 'Weather in Paris?' : 'Say hi.' }],
      maxRetries: 0,
      ...(withTools
        ? {
            tools: {
              get_weather: tool({
                description: 'The weather in a city',
                inputSchema: jsonSchema<{ city: string }>({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }),
              }),
            },
          }
        : {}),
    });
    const parts: unknown[] = [];
    for await (const part of result.fullStream) {
      switch (part.type) {
        case 'text-delta':
          parts.push({ type: part.type, text: part.text });
          break;
        case 'tool-call':
          parts.push({ type: part.type, toolCallId: part.toolCallId, toolName: part.toolName, input: part.input });
          break;
        case 'finish':
          parts.push({ type: part.type, finishReason: part.finishReason, usage: part.totalUsage });
          break;
        case 'error':
          parts.push({ type: part.type, error: String(part.error) });
          break;
        default:
          break;
      }
    }
    return parts;
  }

  it('streams text exactly as without the proxy', async () => {
    const { direct, proxied } = await directAndProxied((baseUrl) => run(baseUrl, false));
    expect(proxied).toEqual(direct);
    const text = direct.flatMap((part) => ((part as { type: string }).type === 'text-delta' ? [(part as { text: string }).text] : [])).join('');
    expect(text).toBe(' player Agrqui two陈gebietจ aos池 libraryROWSR');
    expect(direct.at(-1)).toMatchObject({ type: 'finish', finishReason: 'length', usage: { inputTokens: 25, outputTokens: 12 } });
  });

  it('streams a tool call exactly as without the proxy', async () => {
    const { direct, proxied } = await directAndProxied((baseUrl) => run(baseUrl, true), WEATHER_CALL);
    expect(proxied).toEqual(direct);
    expect(direct).toContainEqual({ type: 'tool-call', toolCallId: 'call_1', toolName: 'get_weather', input: { city: 'Paris' } });
    expect(direct.at(-1)).toMatchObject({ type: 'finish', finishReason: 'tool-calls' });
  });
});

describe('openai client', () => {
  it('assembles the same streamed text and tool call as without the proxy', async () => {
    const run = async (baseUrl: string) => {
      const client = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: 'sk-test', maxRetries: 0 });
      const runner = client.chat.completions.stream({
        model: 'whatever',
        messages: [{ role: 'user', content: 'weather in Paris?' }],
        tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
      });
      return runner.finalChatCompletion();
    };
    const { direct, proxied } = await directAndProxied(run, WEATHER_CALL);
    expect(proxied).toEqual(direct);
    expect(direct.choices[0]?.message.tool_calls?.[0]).toMatchObject({ function: { name: 'get_weather', arguments: '{"city": "Paris"}' } });
  });
});

describe('curl -N', () => {
  const curl = (url: string, body: string): Promise<{ code: number | null; stdout: Buffer; stderr: string }> =>
    new Promise((resolve, reject) => {
      const child = spawnOwned('curl', ['-sS', '-N', '--max-time', '15', `${url}${CHAT}`, '-H', 'content-type: application/json', '-H', 'authorization: Bearer sk-test', '-d', body]);
      const chunks: Buffer[] = [];
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.once('error', reject);
      child.once('exit', (code) => resolve({ code, stdout: Buffer.concat(chunks), stderr }));
    });

  it('streams the same bytes as without the proxy', async () => {
    const body = JSON.stringify({ model: 'whatever', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Say hi.' }] });
    const { direct, proxied } = await directAndProxied((baseUrl) => curl(baseUrl, body));
    expect(direct.code).toBe(0);
    expect(proxied.code).toBe(0);
    // The same bytes, then compactor's last comment with what the server spent (issue 36); curl takes the x-compactor trailer in its stride.
    expect(proxied.stdout.toString()).toBe(direct.stdout.toString() + SERVER_COMMENT);
    expect(direct.stdout.toString()).toMatch(/^data: \{/);
    expect(direct.stdout.toString()).toMatch(/data: \[DONE\]\n\n$/);
  });

  it('streams a tool call, split in 7-byte pieces, byte for byte', async () => {
    const body = JSON.stringify({ model: 'whatever', stream: true, messages: [{ role: 'user', content: 'weather in Paris?' }] });
    const { direct, proxied } = await directAndProxied((baseUrl) => curl(baseUrl, body), WEATHER_CALL);
    expect(proxied.code).toBe(0);
    expect(proxied.stdout.toString()).toBe(direct.stdout.toString() + SERVER_COMMENT);
    expect(direct.stdout.toString()).toContain('"name":"get_weather"');
  });
});
