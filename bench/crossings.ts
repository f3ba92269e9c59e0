/**
 * Issue 13, item 9: does a crossing wait for a summary when it was
 * foreseeable? A 48-turn agent conversation (3 steps a turn, 1.5 KB results,
 * and every sixth turn one ~9k-token result: 28.8 KB at 1.25 tokens per 4
 * bytes) through compactor to the simulated llama-server (32k window, one
 * slot with a prefix KV cache). Reports:
 * - crossings (requests whose forwarded prompt no longer extends the previous
 *   one: an epoch was put in use) and those that waited for a summary
 *   (`compactor_summary_waits_total` moved);
 * - synchronous summaries after the first soft threshold (goal 0);
 * - the share of summary-request prompt tokens the double served from its
 *   KV cache (goal ≥ 90%).
 *
 *   npm run bench:crossings             (npx tsx bench/crossings.ts)
 */
import type { ChatMessage } from '../src/transcript/message.js';
import { turnMessages } from '../test/support/conversation.js';
import { FakeUpstream } from '../test/support/fake-upstream.js';
import { startProxy } from '../test/support/proxy.js';
import { SimulatedLlama } from '../test/support/simulated-llama.js';

const WINDOW = 32_768;
const TURNS = 48;
/** A summary takes this long on the double: a small model writing 1k tokens of notes is slower, but the order of events is what counts. */
const SUMMARY_MS = 100;
/** Pause between an answer and the agent's next request (running its tool): longer than a summary, as a real agent's is. */
const THINK_MS = 250;
const SHAPE = { turns: TURNS, stepsPerTurn: 3, resultBytes: 1500, largeResultEvery: 6, largeResultBytes: 28_800 };

function counter(text: string, name: string): number {
  const line = text.split('\n').find((entry) => entry.startsWith(`${name} `));
  return line === undefined ? 0 : Number(line.slice(name.length + 1));
}

async function main(): Promise<void> {
  const upstream = await FakeUpstream.start();
  const llama = new SimulatedLlama(upstream, { window: WINDOW, summaryDelayMs: SUMMARY_MS });
  const proxy = await startProxy(upstream, { listen: true, config: { log: { level: 'warn' }, compaction: { enabled: true } } });
  const waitsOf = async (): Promise<number> => counter(await (await fetch(`${proxy.url}/metrics`)).text(), 'compactor_summary_waits_total');
  try {
    let history: ChatMessage[] = [{ role: 'system', content: 'You are a careful coding agent.' }];
    let crossings = 0;
    let crossingsThatWaited = 0;
    let waits = 0;
    let previousPrompt: string | null = null;
    const lines: string[] = [];
    for (let turn = 1; turn <= TURNS; turn++) {
      const messages = turnMessages(turn, SHAPE);
      history = [...history, messages[0]!];
      const waitsBefore = await waitsOf();
      const response = await fetch(`${proxy.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'sim', messages: history }),
      });
      if (response.status !== 200) throw new Error(`turn ${turn}: ${response.status} ${await response.text()}`);
      const report = response.headers.get('x-compactor');
      await response.text();
      const waited = (await waitsOf()) - waitsBefore;
      waits += waited;
      const record = llama.chatRecords.at(-1)!;
      const extends_ = previousPrompt === null || record.prompt.startsWith(previousPrompt);
      if (!extends_) {
        crossings++;
        if (waited > 0) crossingsThatWaited++;
      }
      lines.push(`turn ${turn}: ${record.promptTokens} tokens forwarded, ${record.messages.length} messages${extends_ ? '' : ' (crossing)'}${waited > 0 ? ', waited for a summary' : ''}${report === null ? '' : ` — ${report}`}`);
      previousPrompt = record.prompt.slice(0, -'<|im_start|>assistant\n'.length);
      history = [...history, ...messages.slice(1)];
      await new Promise((resolve) => setTimeout(resolve, THINK_MS));
    }
    const summaries = llama.summaryRecords.filter((record) => record.status === 200);
    const prompt = summaries.reduce((sum, record) => sum + record.promptTokens, 0);
    const cached = summaries.reduce((sum, record) => sum + record.cacheTokens, 0);
    console.log(lines.join('\n'));
    console.log('');
    console.log(`| measure | goal | measured |`);
    console.log(`|---|---|---|`);
    console.log(`| crossings that waited for a summary | 0 | ${crossingsThatWaited} of ${crossings} |`);
    console.log(`| synchronous summaries after the first soft threshold | 0 | ${waits} |`);
    console.log(`| summary-request prompt tokens served from the KV cache | ≥ 90% | ${((100 * cached) / Math.max(1, prompt)).toFixed(1)}% (${cached} of ${prompt}, ${summaries.length} summaries) |`);
  } finally {
    await proxy.close();
    await upstream.close();
  }
}

await main();
