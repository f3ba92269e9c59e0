/**
 * Replicas on one store (issue 15): 1 vs 3 compactors, memory vs Redis, 32
 * conversations at once (c=32) growing turn by turn against one simulated
 * llama-server (8k window), each request sent to replica (conversation +
 * turn) mod N. Reports summary calls per epoch (the single memory replica's
 * count is the number of epochs), the p50 and p99 of a request, the
 * throughput, and the bytes an epoch takes in Redis.
 *
 *   npx tsx bench/replicas.ts            (redis-server on the PATH)
 *
 * In-process replicas (buildApp each, its own engine and memory): nothing but
 * the store is shared, as between processes, and the client is the same.
 */
import { Redis } from 'ioredis';
import type { ChatMessage } from '../src/transcript/message.js';
import { turnMessages } from '../test/support/conversation.js';
import { FakeUpstream } from '../test/support/fake-upstream.js';
import { type Proxy, startProxy } from '../test/support/proxy.js';
import { RedisServer } from '../test/support/redis-server.js';
import { SimulatedLlama } from '../test/support/simulated-llama.js';
import { endOwnedProcesses } from '../test/support/child-processes.js';

const CONVERSATIONS = 32;
const TURNS = 24;

interface Row {
  readonly name: string;
  readonly requests: number;
  readonly failed: number;
  readonly summaryCalls: number;
  readonly p50: number;
  readonly p99: number;
  readonly perSecond: number;
}

function percentile(values: number[], share: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(share * sorted.length))]!;
}

async function run(name: string, replicas: number, redisUrl: string | null, prefix: string): Promise<Row> {
  const upstream = await FakeUpstream.start();
  const llama = new SimulatedLlama(upstream, { window: 8192 });
  const cache = redisUrl === null ? {} : { store: 'redis', redis: { url: redisUrl, key_prefix: prefix, timeout_ms: 50 } };
  const proxies: Proxy[] = [];
  for (let index = 0; index < replicas; index++) proxies.push(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true }, cache, log: { level: 'silent' } } }));
  await new Promise((resolve) => setTimeout(resolve, 200));
  const latencies: number[] = [];
  let failed = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONVERSATIONS }, async (_, conversation) => {
      let history: ChatMessage[] = [{ role: 'system', content: `You are a careful coding agent (conversation ${conversation}).` }];
      for (let turn = 1; turn <= TURNS; turn++) {
        const messages = turnMessages(turn, { turns: turn });
        history = [...history, messages[0]!];
        const sentAt = performance.now();
        const response = await fetch(`${proxies[(conversation + turn) % replicas]!.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'sim', messages: history }),
        });
        await response.text();
        latencies.push(performance.now() - sentAt);
        if (response.status !== 200) failed++;
        history = [...history, ...messages.slice(1)];
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  for (const proxy of proxies) await proxy.close();
  await upstream.close();
  return { name, requests: latencies.length, failed, summaryCalls: llama.summaryRecords.length, p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99), perSecond: latencies.length / seconds };
}

async function epochBytes(url: string, prefix: string): Promise<{ count: number; value: number; memory: number }> {
  const redis = new Redis(url);
  const keys = await redis.keys(`${prefix}epoch:*`);
  let value = 0;
  let memory = 0;
  for (const key of keys) {
    value += await redis.strlen(key);
    memory += Number(await redis.memory('USAGE', key));
  }
  redis.disconnect();
  return { count: keys.length, value: Math.round(value / keys.length), memory: Math.round(memory / keys.length) };
}

const redis = await RedisServer.start();
try {
  const rows: Row[] = [];
  rows.push(await run('memory, 1 replica', 1, null, ''));
  rows.push(await run('redis, 1 replica', 1, redis.url, 'bench-1:'));
  rows.push(await run('memory, 3 replicas', 3, null, ''));
  rows.push(await run('redis, 3 replicas', 3, redis.url, 'bench-3:'));
  const epochs = rows[0]!.summaryCalls;
  console.log(`${CONVERSATIONS} conversations at once (c=${CONVERSATIONS}), ${TURNS} turns each, 8k window; epochs (one memory replica's summary calls): ${epochs}\n`);
  console.log('| store, replicas | requests | failed | summary calls | calls per epoch | p50 ms | p99 ms | requests/s |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const row of rows) {
    console.log(`| ${row.name} | ${row.requests} | ${row.failed} | ${row.summaryCalls} | ${(row.summaryCalls / epochs).toFixed(2)} | ${row.p50.toFixed(1)} | ${row.p99.toFixed(1)} | ${row.perSecond.toFixed(0)} |`);
  }
  for (const [prefix, row] of [['bench-1:', rows[1]!], ['bench-3:', rows[3]!]] as const) {
    const bytes = await epochBytes(redis.url, prefix);
    console.log(`\n${row.name}: ${bytes.count} distinct epochs in Redis for ${row.summaryCalls} summary calls (${(row.summaryCalls / bytes.count).toFixed(2)} per epoch); value ${bytes.value} bytes on average, MEMORY USAGE ${bytes.memory} bytes per key`);
  }
} finally {
  await redis.close();
  endOwnedProcesses();
}
