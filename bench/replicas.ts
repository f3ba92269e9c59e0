/**
 * Replicas on one store (issues 15 and 27): memory, one Redis and a 3-node
 * Redis Cluster, in the same run. Reports
 *
 * 1. summary calls per epoch: `CONVERSATIONS` conversations at once growing
 *    turn by turn against one simulated llama-server (8k window), each request
 *    sent to replica (conversation + turn) mod 3 (the single memory replica's
 *    count is the number of epochs);
 * 2. the added p50 of the store: the cached-epoch path (`max_messages: 8`:
 *    every request hashes its prefix, looks up and applies the epoch), c=1,
 *    the three stores interleaved request by request;
 * 3. the bytes of an epoch in Redis, on realistic epochs (a 4-16 KB agent
 *    system prompt and 3-6 KB handoff notes of English and code taken from
 *    this repository's own docs and sources: 10-25 KB of JSON), not the
 *    simulator's short notes.
 *
 *   npx tsx bench/replicas.ts [--conversations=16] [--turns=24] [--requests=300]
 *
 * redis-server and redis-cli on the PATH (it starts its own server and
 * cluster on loopback ports). In-process replicas (buildApp each, its own
 * engine and memory): nothing but the store is shared, as between processes.
 */
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { encodeEpoch } from '../src/compaction/epochs/epoch-codec.js';
import type { Epoch } from '../src/compaction/types.js';
import type { ChatMessage } from '../src/transcript/message.js';
import { endOwnedProcesses } from '../test/support/child-processes.js';
import { conversation, turnMessages } from '../test/support/conversation.js';
import { FakeUpstream } from '../test/support/fake-upstream.js';
import { type Proxy, startProxy } from '../test/support/proxy.js';
import { RedisCluster } from '../test/support/redis-cluster.js';
import { RedisServer } from '../test/support/redis-server.js';
import { SimulatedLlama } from '../test/support/simulated-llama.js';

const argument = (name: string, fallback: number): number => Number(process.argv.find((arg) => arg.startsWith(`--${name}=`))?.split('=')[1] ?? fallback);
const CONVERSATIONS = argument('conversations', 16);
const TURNS = argument('turns', 24);
const REQUESTS = argument('requests', 300);
/** `--only=latency`: part 2 alone, memory against one Redis (to compare two builds of the same store). */
const ONLY_LATENCY = process.argv.includes('--only=latency');

type Cache = Record<string, unknown>;

interface Row {
  readonly name: string;
  readonly requests: number;
  readonly failed: number;
  readonly summaryCalls: number;
  /** Distinct epoch keys the shared store holds afterwards (null for memory). */
  readonly epochKeys: number | null;
}

function percentile(values: readonly number[], share: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(share * sorted.length))]!;
}

async function replicasOn(upstream: FakeUpstream, count: number, cache: Cache, compaction: Cache = {}): Promise<Proxy[]> {
  const proxies: Proxy[] = [];
  for (let index = 0; index < count; index++) {
    proxies.push(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true, ...compaction }, cache, log: { level: 'silent' } } }));
  }
  // The store connected (its first commands would wait for it anyway).
  await new Promise((resolve) => setTimeout(resolve, 300));
  return proxies;
}

function post(url: string, messages: ChatMessage[]): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'sim', messages }) });
}

/** Part 1: summary calls of `CONVERSATIONS` growing conversations across `replicas`. */
async function callsPerEpoch(name: string, replicas: number, cache: Cache, epochKeys: () => Promise<number | null> = async () => null): Promise<Row> {
  const upstream = await FakeUpstream.start();
  const llama = new SimulatedLlama(upstream, { window: 8192 });
  const proxies = await replicasOn(upstream, replicas, cache);
  let requests = 0;
  let failed = 0;
  await Promise.all(
    Array.from({ length: CONVERSATIONS }, async (_, index) => {
      let history: ChatMessage[] = [{ role: 'system', content: `You are a careful coding agent (conversation ${index}).` }];
      for (let turn = 1; turn <= TURNS; turn++) {
        const messages = turnMessages(turn, { turns: turn });
        history = [...history, messages[0]!];
        const response = await post(proxies[(index + turn) % replicas]!.url, history);
        await response.text();
        requests++;
        if (response.status !== 200) failed++;
        history = [...history, ...messages.slice(1)];
      }
    }),
  );
  for (const proxy of proxies) await proxy.close();
  await upstream.close();
  return { name, requests, failed, summaryCalls: llama.summaryRecords.length, epochKeys: await epochKeys() };
}

/** Part 2: the cached-epoch path, c=1, the stores interleaved request by request; each request's milliseconds per store. */
async function cachedEpochLatency(stores: ReadonlyArray<readonly [string, Cache]>): Promise<Map<string, number[]>> {
  const upstream = await FakeUpstream.start();
  new SimulatedLlama(upstream, { window: 8192 });
  const proxies = await Promise.all(stores.map(async ([, cache]) => (await replicasOn(upstream, 1, cache, { max_messages: 8 }))[0]!));
  // Six turns: 13 messages, over max_messages, summarized once by each proxy, then applied from its store.
  const history = conversation({ turns: 7 });
  for (const proxy of proxies) await (await post(proxy.url, history)).text();
  const latencies = new Map(stores.map(([name]) => [name, [] as number[]]));
  for (let request = 0; request < REQUESTS; request++) {
    for (const [index, [name]] of stores.entries()) {
      const sentAt = performance.now();
      const response = await post(proxies[index]!.url, history);
      await response.text();
      if (!response.headers.get('x-compactor')?.startsWith('epoch reused')) throw new Error(`${name}: the epoch was not reused`);
      latencies.get(name)!.push(performance.now() - sentAt);
    }
  }
  for (const proxy of proxies) await proxy.close();
  await upstream.close();
  return latencies;
}

/** Part 3: realistic epochs (text of this repository: prose and code), their encoded bytes and Redis MEMORY USAGE. */
async function realisticEpochBytes(url: string): Promise<Array<{ json: number; value: number; memory: number }>> {
  const prose = readFileSync(new URL('../DESIGN.md', import.meta.url), 'utf8') + readFileSync(new URL('../README.md', import.meta.url), 'utf8');
  const code = readFileSync(new URL('../src/compaction/engine/engine.ts', import.meta.url), 'utf8') + readFileSync(new URL('../src/compaction/engine/epoch-writer.ts', import.meta.url), 'utf8');
  const redis = new Redis(url);
  const sizes: Array<{ json: number; value: number; memory: number }> = [];
  for (const [systemBytes, notesBytes, offset] of [[4_000, 3_000, 0], [8_000, 4_000, 9_000], [12_000, 5_000, 21_000], [16_000, 6_000, 33_000]] as const) {
    const notes = `## Goal\n${prose.slice(offset + 24_000, offset + 24_000 + notesBytes / 2)}\n## Files and code\n${code.slice(offset / 3, offset / 3 + notesBytes / 2)}`;
    const epoch: Epoch = {
      key: 'b'.repeat(22),
      sourceLength: 120,
      seenLength: 150,
      replacement: [
        { role: 'system', content: prose.slice(offset, offset + systemBytes) },
        { role: 'user', content: `[compacted:summary] ${notes}` },
        { role: 'assistant', content: '[compacted:summary] Understood; continuing from these notes.' },
      ],
      marked: [1, 2],
      notes,
      strategy: 'summary',
      report: 'summarized 120 messages -> 1 summary + 30 kept (61.2k -> 9.8k tokens, 14.2s)',
    };
    const value = encodeEpoch(epoch);
    const key = `bench-real:epoch:${systemBytes}`;
    await redis.set(key, value);
    sizes.push({ json: JSON.stringify(epoch).length, value: value.length, memory: Number(await redis.memory('USAGE', key)) });
  }
  redis.disconnect();
  return sizes;
}

// Every server this run starts is stopped in `finally`, also when the cluster fails to start or --only=latency ends early.
let redis: RedisServer | undefined;
let cluster: RedisCluster | undefined;
try {
  redis = await RedisServer.start();
  const one: Cache = { store: 'redis', redis: { url: redis.url, timeout_ms: 50 } };
  if (ONLY_LATENCY) {
    for (const [name, values] of await cachedEpochLatency([['memory', {}], ['one Redis', one]])) console.log(`${name}: p50 ${percentile(values, 0.5).toFixed(3)} ms`);
  } else {
    cluster = await RedisCluster.start();
    await fullRun(redis, cluster, one);
  }
} finally {
  await cluster?.close();
  await redis?.close();
  endOwnedProcesses();
}

async function fullRun(redis: RedisServer, cluster: RedisCluster, one: Cache): Promise<void> {
  const three: Cache = { store: 'redis', redis: { url: cluster.urls, cluster: true, timeout_ms: 50 } };
  const rows: Row[] = [];
  rows.push(await callsPerEpoch('memory, 1 replica', 1, {}));
  rows.push(await callsPerEpoch('memory, 3 replicas', 3, {}));
  const keysOnServer = async (): Promise<number> => {
    const client = new Redis(redis.url);
    const keys = await client.keys('calls:*epoch:*');
    client.disconnect();
    return keys.length;
  };
  const keysOnCluster = async (): Promise<number> => (await Promise.all(cluster.ports.map((port) => cluster.keysOn(port, 'calls:*epoch:*')))).flat().length;
  rows.push(await callsPerEpoch('one Redis, 3 replicas', 3, { ...one, redis: { ...(one['redis'] as Cache), key_prefix: 'calls:' } }, keysOnServer));
  rows.push(await callsPerEpoch('Redis Cluster (3 nodes), 3 replicas', 3, { ...three, redis: { ...(three['redis'] as Cache), key_prefix: 'calls:' } }, keysOnCluster));
  const epochs = rows[0]!.summaryCalls;
  console.log(`## calls per epoch: ${CONVERSATIONS} conversations at once, ${TURNS} turns each, 8k window; epochs (one memory replica's summary calls): ${epochs}\n`);
  console.log('| store, replicas | requests | failed | summary calls | per epoch of one replica | epoch keys in the store | calls per epoch key |');
  console.log('|---|---|---|---|---|---|---|');
  for (const row of rows) {
    const perKey = row.epochKeys === null ? '—' : (row.summaryCalls / row.epochKeys).toFixed(2);
    console.log(`| ${row.name} | ${row.requests} | ${row.failed} | ${row.summaryCalls} | ${(row.summaryCalls / epochs).toFixed(2)} | ${row.epochKeys ?? '—'} | ${perKey} |`);
  }

  const latencies = await cachedEpochLatency([['memory', {}], ['one Redis', one], ['Redis Cluster (3 nodes)', three]]);
  const memoryP50 = percentile(latencies.get('memory')!, 0.5);
  console.log(`\n## cached-epoch path, c=1, ${REQUESTS} requests per store, interleaved\n`);
  console.log('| store | p50 ms | added p50 ms | p99 ms |');
  console.log('|---|---|---|---|');
  for (const [name, values] of latencies) {
    const p50 = percentile(values, 0.5);
    console.log(`| ${name} | ${p50.toFixed(3)} | ${name === 'memory' ? '—' : `+${(p50 - memoryP50).toFixed(3)}`} | ${percentile(values, 0.99).toFixed(3)} |`);
  }

  console.log('\n## realistic epochs\n');
  console.log('| JSON bytes | stored value bytes (deflated) | MEMORY USAGE bytes |');
  console.log('|---|---|---|');
  for (const size of await realisticEpochBytes(redis.url)) console.log(`| ${size.json} | ${size.value} | ${size.memory} |`);
}
