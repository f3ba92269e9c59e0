import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/transcript/message.js';
import { turnMessages, conversation } from '../support/conversation.js';
import { FakeUpstream } from '../support/fake-upstream.js';
import { type MainProcess, startMain } from '../support/main-process.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';
import { RedisServer } from '../support/redis-server.js';
import { SimulatedLlama } from '../support/simulated-llama.js';

/**
 * Issue 15: several compactor processes (src/main.ts, each its own memory)
 * on one real redis-server, in front of one simulated llama-server. Real
 * processes rather than several buildApp() in one: nothing but Redis can
 * carry an epoch from one replica to another, and a restart is a real one.
 */

const opened = closedAfterEachTest();
const replicas: MainProcess[] = [];

afterEach(async () => {
  for (const replica of replicas.splice(0)) {
    if (replica.child.exitCode === null) replica.child.kill('SIGKILL');
    await replica.exit;
  }
});

const WINDOW = 8192;

// On two cores shared by a whole suite a loopback command can take more than the 50 ms default; a late answer would
// count as a fault and let a replica summarize on its own. The bound itself is tested in redis-store.test.ts.
const CONFIG = join(mkdtempSync(join(tmpdir(), 'compactor-replicas-')), 'config.yaml');
writeFileSync(CONFIG, 'cache:\n  redis:\n    timeout_ms: 2000\n');

/** Until /readyz says the replica works with Redis: a load balancer sends it traffic once ready. */
async function storeReady(url: string): Promise<void> {
  for (let tries = 0; tries < 500; tries++) {
    const body = (await (await fetch(`${url}/readyz`)).json()) as { store?: string };
    if (body.store === 'redis') return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`${url}: the store never connected`);
}

async function startReplica(upstream: FakeUpstream, redis: RedisServer): Promise<{ replica: MainProcess; url: string }> {
  const replica = startMain(['--host', '127.0.0.1', '--port', '0'], {
    COMPACTOR_CONFIG: CONFIG,
    COMPACTOR_UPSTREAM_URL: upstream.url,
    COMPACTOR_CACHE_STORE: 'redis',
    COMPACTOR_REDIS_URL: redis.url,
    COMPACTOR_LOG_LEVEL: 'info',
  });
  replicas.push(replica);
  const url = await replica.url;
  await storeReady(url);
  return { replica, url };
}

async function simulated(): Promise<{ upstream: FakeUpstream; llama: SimulatedLlama }> {
  const upstream = opened(await FakeUpstream.start());
  return { upstream, llama: new SimulatedLlama(upstream, { window: WINDOW }) };
}

function post(url: string, messages: ChatMessage[]): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'sim', messages }) });
}

/**
 * A conversation growing turn by turn, request `turn` sent to `pick(turn)`;
 * the pause between turns is an agent's, in which background epochs finish.
 * Returns the status of every request.
 */
async function drive(pick: (turn: number) => Promise<string> | string, turns: number, from = 1, start: ChatMessage[] = [{ role: 'system', content: 'You are a careful coding agent.' }]): Promise<{ statuses: number[]; history: ChatMessage[] }> {
  let history = start;
  const statuses: number[] = [];
  for (let turn = from; turn < from + turns; turn++) {
    const messages = turnMessages(turn, { turns: turn });
    history = [...history, messages[0]!];
    const response = await post(await pick(turn), history);
    await response.text();
    statuses.push(response.status);
    history = [...history, ...messages.slice(1)];
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { statuses, history };
}

describe('replicas sharing epochs through Redis', () => {
  it('3 replicas taking turns: as many summary calls as one replica, and the same forwarded prompts byte for byte', { timeout: 90_000 }, async () => {
    const redis = opened(await RedisServer.start());
    // The reference: one compactor with its memory store, today's sidecar.
    const single = await simulated();
    const proxy = opened(await startProxy(single.upstream, { listen: true, config: { compaction: { enabled: true } } }));
    await drive(() => proxy.url, 36);

    const shared = await simulated();
    const urls = (await Promise.all([0, 1, 2].map(() => startReplica(shared.upstream, redis)))).map((started) => started.url);
    const { statuses } = await drive((turn) => urls[turn % 3]!, 36);

    expect(statuses.every((status) => status === 200)).toBe(true);
    expect(single.llama.summaryRecords.length).toBeGreaterThan(1);
    expect(shared.llama.summaryRecords).toHaveLength(single.llama.summaryRecords.length);
    expect(shared.llama.chatRecords.map((record) => record.prompt)).toEqual(single.llama.chatRecords.map((record) => record.prompt));
  });

  it('a replica restarted mid-conversation reuses the epochs: no summary call on its next request', { timeout: 60_000 }, async () => {
    const redis = opened(await RedisServer.start());
    const { upstream, llama } = await simulated();
    let current = await startReplica(upstream, redis);
    const { history } = await drive(() => current.url, 30);
    expect(llama.summaryRecords.length).toBeGreaterThan(0);
    const before = llama.records.length;
    const lastForwarded = llama.chatRecords.at(-1)!;

    current.replica.child.kill('SIGTERM');
    await current.replica.exit;
    current = await startReplica(upstream, redis);
    // The same history again, as a client retrying after the restart.
    const response = await post(current.url, history.slice(0, history.lastIndexOf(history.filter((message) => message.role === 'user').at(-1)!) + 1));
    expect(response.status).toBe(200);
    expect(response.headers.get('x-compactor')).toMatch(/^epoch reused/);
    const after = llama.records.slice(before);
    expect(after.filter((record) => record.kind === 'summary')).toEqual([]);
    expect(after.at(-1)!.prompt).toBe(lastForwarded.prompt);
  });

  it('Redis killed and restarted mid-conversation: every request answered, /readyz degraded but ready, faults counted', { timeout: 60_000 }, async () => {
    const redis = opened(await RedisServer.start());
    const { upstream } = await simulated();
    const urls = [(await startReplica(upstream, redis)).url, (await startReplica(upstream, redis)).url];
    const first = await drive((turn) => urls[turn % 2]!, 20);
    await redis.kill();
    const down = await drive((turn) => urls[turn % 2]!, 8, 21, first.history);
    const ready = await fetch(`${urls[0]}/readyz`);
    expect(ready.status).toBe(200);
    expect(((await ready.json()) as { store: string }).store).toBe('redis (degraded: memory)');
    expect(await (await fetch(`${urls[0]}/metrics`)).text()).toMatch(/compactor_store_faults_total\{operation="lookup"\} [1-9]/);
    await redis.start();
    const back = await drive((turn) => urls[turn % 2]!, 8, 29, down.history);
    expect([...first.statuses, ...down.statuses, ...back.statuses].every((status) => status === 200)).toBe(true);
    expect(((await (await fetch(`${urls[0]}/readyz`)).json()) as { store: string }).store).toBe('redis');
  });

  it('two replicas crossing the threshold at the same instant: one summary call, the same forwarded prompt', { timeout: 60_000 }, async () => {
    const redis = opened(await RedisServer.start());
    const { upstream, llama } = await simulated();
    llama.summaryDelayMs = 500;
    const urls = [(await startReplica(upstream, redis)).url, (await startReplica(upstream, redis)).url];
    const messages = conversation({ turns: 22 });
    const responses = await Promise.all(urls.map((url) => post(url, messages)));
    expect(responses.map((response) => response.status)).toEqual([200, 200]);
    await Promise.all(responses.map((response) => response.text()));
    expect(llama.summaryRecords).toHaveLength(1);
    const [first, second] = llama.chatRecords;
    expect(second!.prompt).toBe(first!.prompt);
  });
});
