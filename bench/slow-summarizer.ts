/**
 * What a slow summarizer costs a client (issue 5), against the simulated
 * llama-server with summaries that take 4 s:
 * - time to first byte, and to the first answer event, of a streamed request
 *   that must wait for a summary (progress comments on);
 * - request latency percentiles of a conversation growing turn by turn, with
 *   background epochs (soft_threshold 0.6) and without them (soft_threshold
 *   equal to the threshold, so every epoch is computed while a client waits).
 *
 *   npx tsx bench/slow-summarizer.ts        (or: npm run bench:slow-summarizer)
 */
import type { ChatMessage } from '../src/transcript/message.js';
import { conversation, turnMessages } from '../test/support/conversation.js';
import { FakeUpstream } from '../test/support/fake-upstream.js';
import { startProxy } from '../test/support/proxy.js';
import { SimulatedLlama } from '../test/support/simulated-llama.js';

const SUMMARY_MS = 4000;
const WINDOW = 8192;
/** Pause between an answer and the agent's next request (reading, running a tool). */
const THINK_MS = 500;

async function withProxy<T>(config: Record<string, unknown>, work: (url: string, llama: SimulatedLlama) => Promise<T>): Promise<T> {
  const upstream = await FakeUpstream.start();
  const llama = new SimulatedLlama(upstream, { window: WINDOW, summaryDelayMs: SUMMARY_MS });
  const proxy = await startProxy(upstream, { listen: true, config: { log: { level: 'warn' }, compaction: { enabled: true, ...config } } });
  try {
    return await work(proxy.url, llama);
  } finally {
    await proxy.close();
    await upstream.close();
  }
}

function post(url: string, body: Record<string, unknown>): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'sim', ...body }) });
}

async function firstBytes(): Promise<{ firstByteMs: number; firstDataMs: number; totalMs: number }> {
  return withProxy({}, async (url) => {
    const started = performance.now();
    const response = await post(url, { messages: conversation({ turns: 22 }), stream: true });
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let firstByteMs = -1;
    let firstDataMs = -1;
    let text = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (firstByteMs < 0) firstByteMs = performance.now() - started;
      text += decoder.decode(value, { stream: true });
      if (firstDataMs < 0 && text.includes('data:')) firstDataMs = performance.now() - started;
    }
    return { firstByteMs, firstDataMs, totalMs: performance.now() - started };
  });
}

function percentile(values: readonly number[], share: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(share * sorted.length))]!;
}

async function growingConversation(config: Record<string, unknown>): Promise<{ latencies: number[]; summaries: number }> {
  return withProxy(config, async (url, llama) => {
    let history: ChatMessage[] = [{ role: 'system', content: 'You are a careful coding agent.' }];
    const latencies: number[] = [];
    for (let turn = 1; turn <= 40; turn++) {
      const messages = turnMessages(turn, { turns: turn });
      history = [...history, messages[0]!];
      const started = performance.now();
      const response = await post(url, { messages: history });
      await response.text();
      latencies.push(performance.now() - started);
      history = [...history, ...messages.slice(1)];
      await new Promise((resolve) => setTimeout(resolve, THINK_MS));
    }
    return { latencies, summaries: llama.summaryRecords.length };
  });
}

const first = await firstBytes();
const background = await growingConversation({});
const foreground = await growingConversation({ soft_threshold: 0.85 });

const ms = (value: number): string => `${Math.round(value)} ms`;
console.log(`Node ${process.version}, ${new Date().toISOString().slice(0, 10)}; summaries take ${SUMMARY_MS} ms, ${WINDOW}-token window\n`);
console.log('| streamed request waiting for a summary | time |');
console.log('|---|---:|');
console.log(`| first byte (a progress comment) | ${ms(first.firstByteMs)} |`);
console.log(`| first answer event | ${ms(first.firstDataMs)} |`);
console.log(`| whole answer | ${ms(first.totalMs)} |`);
console.log('\n| growing conversation, 40 requests | summaries | p50 | p90 | p99 | max |');
console.log('|---|---:|---:|---:|---:|---:|');
for (const [name, run] of [['background epochs (soft_threshold 0.6)', background], ['no background (soft_threshold = threshold)', foreground]] as const) {
  const { latencies, summaries } = run;
  console.log(`| ${name} | ${summaries} | ${ms(percentile(latencies, 0.5))} | ${ms(percentile(latencies, 0.9))} | ${ms(percentile(latencies, 0.99))} | ${ms(Math.max(...latencies))} |`);
}
