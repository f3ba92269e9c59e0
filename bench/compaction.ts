/**
 * Compaction against a naive sliding window, on the same scripted agent
 * conversation and the same simulated llama-server (32k window, a tokenizer
 * 25% above bytes/4, one slot with a prefix cache).
 *
 *   npx tsx bench/compaction.ts            (or: npm run bench:compaction)
 *
 * The baseline is what many clients do: on every request, drop the oldest
 * messages until the prompt is under 75% of the window (then drop tool
 * results left without their call, so the request stays valid).
 */
import type { ChatMessage } from '../src/transcript/message.js';
import { headLength } from '../src/transcript/groups.js';
import { FakeUpstream } from '../test/support/fake-upstream.js';
import { startProxy } from '../test/support/proxy.js';
import { SimulatedLlama } from '../test/support/simulated-llama.js';
import { factsIn } from '../test/support/conversation.js';
import { AGENT_TOOLS, runAgent, type AgentRunOptions } from '../test/e2e/agent-run.js';

const WINDOW = 32_768;
const SCRIPT = { turns: 45, stepsPerTurn: 2, resultBytes: 1500, largeResultEvery: 7, largeResultBytes: 30_000, tools: AGENT_TOOLS } as const;

interface Row {
  readonly name: string;
  readonly requests: number;
  readonly failed: number;
  readonly summaryCalls: number;
  readonly promptTokens: number;
  readonly processedTokens: number;
  readonly reuse: number;
  readonly factsAtEnd: string;
  readonly seconds: number;
}

function slidingWindow(llama: SimulatedLlama, share: number): (messages: ChatMessage[]) => ChatMessage[] {
  return (messages) => {
    const head = headLength(messages);
    let start = head;
    const size = (from: number): number => llama.tokensOf(llama.render({ messages: [...messages.slice(0, head), ...messages.slice(from)], tools: AGENT_TOOLS }));
    while (start < messages.length - 1 && size(start) > share * llama.window) start++;
    while (start < messages.length - 1 && messages[start]!.role === 'tool') start++;
    return [...messages.slice(0, head), ...messages.slice(start)];
  };
}

async function measure(name: string, run: (upstream: FakeUpstream, llama: SimulatedLlama) => Promise<Partial<AgentRunOptions> & { baseUrl: string; close?: () => Promise<void> }>): Promise<Row> {
  const upstream = await FakeUpstream.start();
  const llama = new SimulatedLlama(upstream, { window: WINDOW });
  const setup = await run(upstream, llama);
  const started = performance.now();
  const exchanges = await runAgent({ ...SCRIPT, ...setup });
  const failure = exchanges.find((exchange) => exchange.status !== 200);
  if (failure !== undefined) console.error(`${name}: first failure ${failure.status} ${failure.body.slice(0, 300)}`);
  const seconds = (performance.now() - started) / 1000;
  await setup.close?.();
  await upstream.close();
  const records = llama.records.filter((record) => record.status === 200);
  const promptTokens = records.reduce((sum, record) => sum + record.promptTokens, 0);
  const cached = records.reduce((sum, record) => sum + record.cacheTokens, 0);
  const last = llama.chatRecords.at(-1)!;
  const planted = SCRIPT.turns - 1;
  const kept = [...factsIn(last.prompt)].filter((fact) => Number(fact.slice(5)) < SCRIPT.turns).length;
  return {
    name,
    requests: exchanges.length,
    failed: exchanges.filter((exchange) => exchange.status !== 200).length,
    summaryCalls: llama.summaryRecords.length,
    promptTokens,
    processedTokens: promptTokens - cached,
    reuse: promptTokens === 0 ? 0 : cached / promptTokens,
    factsAtEnd: `${kept}/${planted}`,
    seconds,
  };
}

const rows = [
  await measure('compactor', async (upstream) => {
    const proxy = await startProxy(upstream, { listen: true, config: { log: { level: 'warn' }, compaction: { enabled: true } } });
    return { baseUrl: proxy.url, close: proxy.close };
  }),
  await measure('sliding window (75%)', async (upstream, llama) => ({ baseUrl: upstream.url, rewrite: slidingWindow(llama, 0.75) })),
];

const thousands = (value: number): string => value.toLocaleString('en-US');
console.log(`Node ${process.version}, ${new Date().toISOString().slice(0, 10)}; ${SCRIPT.turns} turns, ${WINDOW}-token window\n`);
console.log('| run | requests | failed | summary calls | prompt tokens sent | tokens the upstream processed | KV reuse | planted facts in the last prompt |');
console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
for (const row of rows) {
  console.log(
    `| ${row.name} | ${row.requests} | ${row.failed} | ${row.summaryCalls} | ${thousands(row.promptTokens)} | ${thousands(row.processedTokens)} | ${(row.reuse * 100).toFixed(1)}% | ${row.factsAtEnd} |`,
  );
}
