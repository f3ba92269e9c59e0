import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isMarked } from '../../../src/transcript/marks.js';
import type { ChatMessage } from '../../../src/transcript/message.js';
import { FakeUpstream } from '../../support/fake-upstream.js';
import { type Proxy, startProxy } from '../../support/proxy.js';
import { ScriptedLlama } from './scripted-llama.js';

/**
 * The shapes real agents send (measured with opencode 1.18.33 and qwen-code
 * 0.15.10 / 0.24.4), sent through the `openai` SDK to compactor and the
 * scripted llama-server: what compactor keeps of a history reaches the
 * upstream as it came — `reasoning_content` on earlier assistant messages,
 * text parts as parts, strings as strings, `null` or `""` beside
 * `tool_calls`, tools without `parameters` or with `$schema` inside them.
 * Only the messages compactor writes itself are new.
 */

const WINDOW = 8_192;

let upstream: FakeUpstream;
let proxy: Proxy;
let llama: ScriptedLlama;
beforeAll(async () => {
  upstream = await FakeUpstream.start();
  proxy = await startProxy(upstream, { listen: true, config: { compaction: { enabled: true } } });
});
afterAll(async () => {
  await proxy?.close();
  await upstream?.close();
});
afterEach(() => upstream.reset());

function attachLlama(): void {
  llama = new ScriptedLlama({ script: [{ answer: 'Done.' }], workDirectory: '/nowhere', window: WINDOW }).attach(upstream);
}

const QWEN_TOOLS = [
  // qwen-code 0.24 declares some tools with no parameters at all.
  { type: 'function', function: { name: 'get_goal', description: 'The current goal.' } },
  { type: 'function', function: { name: 'read_file', description: 'Reads a file.', parameters: { type: 'object', properties: { file_path: { type: 'string' } }, required: ['file_path'] } } },
];

const OPENCODE_TOOLS = [
  {
    type: 'function',
    function: {
      name: 'read',
      description: 'Reads a file.',
      parameters: { $schema: 'http://json-schema.org/draft-07/schema#', type: 'object', properties: { filePath: { type: 'string' } }, required: ['filePath'], additionalProperties: false },
    },
  },
];

const parts = (...texts: string[]) => texts.map((text) => ({ type: 'text', text }));

/** qwen-code's history: text parts for user and tool content, null beside tool_calls, reasoning echoed, a system reminder in the first user message. */
function qwenHistory(steps: number, resultChars: number): ChatMessage[] {
  const messages: ChatMessage[] = [
    { role: 'system', content: 'You are Qwen Code, a CLI agent.' },
    { role: 'user', content: parts('<system-reminder>\nSkills available: none.\n</system-reminder>', 'Fix the shop project.') },
  ];
  for (let step = 1; step <= steps; step++) {
    const calls = [1, 2].map((index) => ({ id: `call_${step}_${index}`, type: 'function', function: { name: 'read_file', arguments: JSON.stringify({ file_path: `/shop/file-${step}-${index}.js` }) } }));
    messages.push({ role: 'assistant', content: null, reasoning_content: `Step ${step}: I read two files.`, tool_calls: calls } as ChatMessage);
    for (const call of calls) {
      messages.push({ role: 'tool', tool_call_id: call.id, content: parts(`${call.id}: ${'x'.repeat(resultChars)}`, '<system-reminder>\nThe file is unchanged.\n</system-reminder>') } as ChatMessage);
    }
  }
  return messages;
}

/** opencode's history: string contents, "" beside tool_calls, reasoning echoed. */
function opencodeHistory(steps: number, resultChars: number): ChatMessage[] {
  const messages: ChatMessage[] = [
    { role: 'system', content: 'You are opencode, an interactive CLI tool.' },
    { role: 'user', content: 'Fix the shop project.' },
  ];
  for (let step = 1; step <= steps; step++) {
    const call = { id: `call_${step}`, type: 'function', function: { name: 'read', arguments: JSON.stringify({ filePath: `/shop/file-${step}.js` }) } };
    messages.push({ role: 'assistant', content: '', reasoning_content: `Step ${step}: I read a file.`, tool_calls: [call] } as ChatMessage);
    messages.push({ role: 'tool', tool_call_id: call.id, content: `${call.id}: ${'y'.repeat(resultChars)}` });
  }
  return messages;
}

async function send(messages: ChatMessage[], extra: Record<string, unknown>): Promise<ChatMessage[]> {
  const client = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'sk-local', maxRetries: 0 });
  const stream = await client.chat.completions.create({
    model: 'scripted',
    messages: messages as unknown as OpenAI.Chat.ChatCompletionMessageParam[],
    stream: true,
    stream_options: { include_usage: true },
    ...extra,
  } as OpenAI.Chat.ChatCompletionCreateParamsStreaming);
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
  expect(text).toBe('Done.');
  const main = llama.requestsOf('main');
  expect(main).toHaveLength(1);
  return main[0]!.body['messages'] as ChatMessage[];
}

/** Every forwarded message compactor did not write is one the client sent, byte for byte in its JSON. */
function expectKeptAsSent(forwarded: ChatMessage[], sent: ChatMessage[]): ChatMessage[] {
  const sentByJson = new Set(sent.map((message) => JSON.stringify(message)));
  const kept = forwarded.filter((message) => !isMarked(message));
  for (const message of kept) expect(sentByJson.has(JSON.stringify(message)), JSON.stringify(message).slice(0, 200)).toBe(true);
  return kept;
}

const shapes = [
  // Steps enough for a history of about 6.5k tokens: past the threshold of an 8k window, within reach of one suffix-mode summary.
  { agent: 'qwen-code', history: qwenHistory, longSteps: 10, extra: { max_tokens: 32_000, tools: QWEN_TOOLS } },
  { agent: 'opencode', history: opencodeHistory, longSteps: 20, extra: { max_tokens: 8_192, tool_choice: 'auto', tools: OPENCODE_TOOLS } },
] as const;

describe.each(shapes)('a $agent-shaped history through the openai SDK', ({ history, longSteps, extra }) => {
  it('is forwarded unchanged while it fits', async () => {
    attachLlama();
    const sent = history(3, 200);
    const forwarded = await send(sent, extra);
    expect(forwarded).toEqual(sent);
    const body = llama.requestsOf('main')[0]!.body;
    expect(body['tools']).toEqual(extra.tools);
    expect(body['max_tokens']).toBe(extra.max_tokens);
  });

  it('keeps the shapes of the messages it keeps when it compacts, and writes only marked messages', async () => {
    attachLlama();
    const sent = history(longSteps, 1_200);
    const forwarded = await send(sent, extra);
    expect(llama.requestsOf('summary').length).toBeGreaterThanOrEqual(1);
    expect(forwarded.length).toBeLessThan(sent.length);
    const kept = expectKeptAsSent(forwarded, sent);
    // The kept part holds each shape: the first user message, assistant messages with their reasoning, tool results.
    expect(kept.filter((message) => message.role === 'user')).toEqual([sent[1]]);
    // Every assistant step forwarded, the one carrying the notes of the steps tier included, keeps its reasoning and calls as sent.
    const steps = forwarded.filter((message) => message.role === 'assistant' && Array.isArray(message.tool_calls));
    expect(steps.length).toBeGreaterThan(0);
    for (const step of steps) {
      const id = (step.tool_calls as Array<{ id: string }>)[0]!.id;
      const original = sent.find((message) => message.role === 'assistant' && (message.tool_calls as Array<{ id: string }>)[0]!.id === id)!;
      expect(step.reasoning_content).toBe(original.reasoning_content);
      expect(step.tool_calls).toEqual(original.tool_calls);
    }
    expect(kept.some((message) => message.role === 'tool')).toBe(true);
    expect(llama.requestsOf('main')[0]!.pairProblems).toEqual([]);
    expect(llama.requestsOf('main')[0]!.tokens).toBeLessThanOrEqual(WINDOW);
  });
});
