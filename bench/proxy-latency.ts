/**
 * Added latency of compactor over a direct call, for a small non-streamed
 * chat completion against the loopback llama-server double.
 *
 *   npx tsx bench/proxy-latency.ts [requests=2000] [warmup=500]
 *
 * Sequential requests (one in flight), the same kind of keep-alive undici
 * client for every path, everything in one process: the difference is
 * compactor's own work plus one more loopback hop. Two proxies: the data path
 * alone (compaction.enabled: false) and the default configuration. After a
 * warm-up of each, the paths are measured in interleaved rounds.
 */
import { Writable } from 'node:stream';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { buildApp } from '../src/app.js';
import { parseConfig } from '../src/config/schema.js';
import { FakeUpstream } from '../test/support/fake-upstream.js';

const requests = Number(process.argv[2] ?? 2000);
const warmup = Number(process.argv[3] ?? 500);

const body = JSON.stringify({
  model: 'whatever',
  messages: [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'Say hi.' },
  ],
  max_tokens: 12,
});

function percentile(sorted: readonly number[], fraction: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))] ?? Number.NaN;
}

async function measure(origin: string, count: number): Promise<number[]> {
  const pool = new Pool(origin, { connections: 1 });
  const once = async (): Promise<number> => {
    const started = performance.now();
    const response = await pool.request({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: { 'content-type': 'application/json', authorization: 'Bearer bench' },
      body,
    });
    await response.body.arrayBuffer();
    if (response.statusCode !== 200) throw new Error(`status ${response.statusCode}`);
    return performance.now() - started;
  };
  const times: number[] = [];
  for (let index = 0; index < count; index++) times.push(await once());
  await pool.close();
  return times;
}

// Logs at info go nowhere, but are still formatted: that cost is part of the proxy.
const discard = new Writable({
  write(_chunk, _encoding, callback) {
    callback();
  },
});

const upstream = await FakeUpstream.start();
const targets: Array<{ name: string; origin: string; close: () => Promise<void> }> = [
  { name: 'direct', origin: upstream.url, close: async () => undefined },
];
for (const [name, compaction] of [
  ['compactor (data path, compaction off)', { enabled: false }],
  ['compactor (default config)', {}],
] as const) {
  const parsed = parseConfig({ upstream: { url: upstream.url }, compaction, log: { level: 'info' } });
  if (!parsed.ok) throw new Error(parsed.errors.join('; '));
  const app = buildApp(parsed.config, { logStream: discard });
  await app.listen({ host: '127.0.0.1', port: 0 });
  targets.push({ name, origin: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, close: () => app.close() });
}

// Interleaved rounds, so JIT warm-up and machine noise fall on every path alike.
const ROUNDS = 4;
const results: Record<string, number[]> = {};
for (const target of targets) await measure(target.origin, warmup);
for (let round = 0; round < ROUNDS; round++) {
  for (const target of targets) {
    (results[target.name] ??= []).push(...(await measure(target.origin, Math.ceil(requests / ROUNDS))));
    upstream.requests.length = 0;
  }
}
for (const target of targets) await target.close();
await upstream.close();
for (const times of Object.values(results)) times.sort((a, b) => a - b);

const direct = results['direct']!;
const rows = Object.entries(results).map(([name, times]) => ({
  path: name,
  'p50 ms': percentile(times, 0.5).toFixed(3),
  'p99 ms': percentile(times, 0.99).toFixed(3),
  'added p50 ms': name.startsWith('direct') ? '' : (percentile(times, 0.5) - percentile(direct, 0.5)).toFixed(3),
  'added p99 ms': name.startsWith('direct') ? '' : (percentile(times, 0.99) - percentile(direct, 0.99)).toFixed(3),
}));
console.log(`node ${process.version}, ${requests} sequential requests after ${warmup} warm-up, small non-streamed chat completion`);
console.table(rows);
