/**
 * A fleet of llama-servers (issue 39): 9 coding-agent conversations at once
 * on 3 llama-server doubles (test/support/slot-llama.ts: 3 slots each,
 * similarity/LRU choice, the host-RAM prompt cache, id_slot), TURNS turns
 * each (30 by default), the whole history every turn, and between turns a
 * think time (the agent's tool run) of 0–60 ms from a seeded sequence: in
 * lock step, 9 conversations on a round-robin of 3 would land each on one
 * server by accident (request i of a round always goes to i mod 3). Two
 * setups, run in both orders in one process (the machine is shared):
 *
 * - `round-robin`: compactor (upstream.slots off, as config.example.yaml
 *   says behind a balancer) in front of a round-robin balancer written
 *   here (each request to the next server, as nginx's default does);
 * - `fleet`: compactor with `upstream.servers` listing the three servers
 *   (a home server per conversation, home slots on each).
 *
 *   npx tsx bench/fleet.ts            (TURNS=30; MODES=fleet,round-robin,round-robin,fleet; RAM=0: --cache-ram 0)
 *
 * Reported: KV reuse (prompt tokens served from a cache / prompt tokens, over
 * the three servers), prompt tokens processed, p50/p99 of a turn as the
 * client saw it, failed turns. The double's clock: prompt tokens processed ×
 * 0.01 ms plus 16 generated tokens × 2 ms; its slots run in parallel
 * (absolute times are the double's; the ratios between setups are what counts).
 */
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ChatMessage } from '../src/transcript/message.js';
import { FakeUpstream } from '../test/support/fake-upstream.js';
import { startProxy } from '../test/support/proxy.js';
import { SlotLlama } from '../test/support/slot-llama.js';

const TURNS = Number(process.env['TURNS'] ?? 30);
// RAM=0: llama-server's host-RAM prompt cache off (`--cache-ram 0`); on by default, as in recent builds.
const RAM = process.env['RAM'] !== '0';
const CONVERSATIONS = 9;
const SERVERS = 3;
const SLOTS = 3;
const GENERATED = 16;
const MS_PER_GENERATED = 2;

type Mode = 'fleet' | 'round-robin';
const MODES = (process.env['MODES'] ?? 'fleet,round-robin,round-robin,fleet').split(',') as Mode[];

interface Row {
  readonly mode: Mode;
  readonly reuse: number;
  readonly processed: number;
  readonly p50: number;
  readonly p99: number;
  readonly failed: number;
  readonly seconds: number;
}

/** The same think times in every run: a linear congruential sequence from a fixed seed. */
function thinkTimes(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state % 61;
  };
}

function percentile(values: number[], share: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(share * sorted.length))] ?? 0;
}

const SYSTEM = 'You are a coding agent. Use the tools to read, edit and test code. '.repeat(60);

function toolResult(conversation: number, turn: number): string {
  return `conversation ${conversation}, turn ${turn}: `.padEnd(1200, `${conversation}${turn} output line `);
}

/** A round-robin balancer: each request to the next server, its bytes piped both ways, nothing else (nginx's default upstream choice). */
async function roundRobin(targets: readonly string[]): Promise<{ url: string; close(): Promise<void> }> {
  let next = 0;
  const server: Server = createServer((incoming, outgoing) => {
    const target = new URL(targets[next++ % targets.length]!);
    const forwarded = httpRequest({ host: target.hostname, port: target.port, method: incoming.method, path: incoming.url, headers: incoming.headers }, (answer) => {
      outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(outgoing);
    });
    forwarded.on('error', () => outgoing.destroy());
    incoming.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

async function run(mode: Mode): Promise<Row> {
  const upstreams = await Promise.all(Array.from({ length: SERVERS }, () => FakeUpstream.start()));
  const llamas = upstreams.map(
    (upstream) => new SlotLlama(upstream, { slots: SLOTS, cacheRamTokens: RAM ? Number.POSITIVE_INFINITY : 0, window: 65536, msPerPromptToken: 0.01, msPerGeneratedToken: MS_PER_GENERATED, generatedTokens: GENERATED }),
  );
  const balancer = mode === 'round-robin' ? await roundRobin(upstreams.map((upstream) => upstream.url)) : null;
  const upstream =
    balancer === null ? { slots: 'auto', servers: upstreams.map((each) => ({ url: each.url })), health_interval_ms: 60_000 } : { url: balancer.url, slots: 'off' };
  const proxy = await startProxy(upstreams[0]!, { listen: true, config: { upstream, compaction: { enabled: false } } });
  const latencies: number[] = [];
  let failed = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONVERSATIONS }, async (_, conversation) => {
      const think = thinkTimes(conversation + 1);
      let history: ChatMessage[] = [{ role: 'system', content: SYSTEM }];
      for (let turn = 1; turn <= TURNS; turn++) {
        history = [...history, { role: 'user', content: toolResult(conversation, turn) }];
        const sentAt = performance.now();
        const response = await fetch(`${proxy.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'sim', messages: history }) });
        const answer = (await response.json()) as { choices?: Array<{ message: { content: string } }> };
        latencies.push(performance.now() - sentAt);
        if (response.status !== 200) failed++;
        history = [...history, { role: 'assistant', content: answer.choices?.[0]?.message.content ?? '' }];
        await new Promise((resolve) => setTimeout(resolve, think()));
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  await proxy.close();
  await balancer?.close();
  for (const each of upstreams) await each.close();
  const prompt = llamas.reduce((sum, llama) => sum + llama.model.counters.promptTokens, 0);
  const reused = llamas.reduce((sum, llama) => sum + llama.model.counters.reusedTokens, 0);
  const processed = llamas.reduce((sum, llama) => sum + llama.model.counters.processedTokens, 0);
  return { mode, reuse: prompt === 0 ? 0 : reused / prompt, processed, p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99), failed, seconds };
}

const rows: Row[] = [];
for (const mode of MODES) rows.push(await run(mode));
console.log(`${CONVERSATIONS} conversations on ${SERVERS} servers of ${SLOTS} slots, ${TURNS} turns each, RAM prompt cache ${RAM ? 'on' : 'off'}; a turn's generation: ${GENERATED * MS_PER_GENERATED} ms\n`);
console.log('| run | setup | KV reuse | prompt tokens processed | p50 ms | p99 ms | failed | wall s |');
console.log('|---|---|---|---|---|---|---|---|');
for (const [index, row] of rows.entries()) {
  console.log(`| ${index + 1} | ${row.mode} | ${(row.reuse * 100).toFixed(1)}% | ${(row.processed / 1000).toFixed(0)}k | ${row.p50.toFixed(0)} | ${row.p99.toFixed(0)} | ${row.failed} | ${row.seconds.toFixed(1)} |`);
}
