import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { FakeUpstream } from '../support/fake-upstream.js';
import { closedAfterEachTest, LogCapture, testConfig } from '../support/proxy.js';
import { RedisServer } from '../support/redis-server.js';
import { SlotLlama } from '../support/slot-llama.js';

/**
 * Replicas agree on slots (issue 39): two compactor replicas in front of one
 * llama-server (slot-llama.ts: a request pinned with `id_slot` to a slot
 * that runs another is counted in `busyPins`, where the real server moves
 * caches in and out of the slot), sharing one real redis-server, never put
 * two requests into one slot at once: each slot is leased in the store.
 */

const track = closedAfterEachTest();
let redis: RedisServer;

beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await redis.close();
});

async function replica(upstream: FakeUpstream, store: Record<string, unknown>, servers?: FakeUpstream[]): Promise<string> {
  const fleet = servers === undefined ? {} : { servers: servers.map((server) => ({ url: server.url })), health_interval_ms: 600_000 };
  const app = buildApp(testConfig(upstream.url, { upstream: { slots: 'auto', ...fleet }, cache: store }), { logStream: new LogCapture() });
  await app.listen({ host: '127.0.0.1', port: 0 });
  track({
    close: async () => {
      app.proxy.startDraining();
      await app.close();
    },
  });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

async function conversation(url: string, name: string, turns: number): Promise<number[]> {
  const statuses: number[] = [];
  const messages = [{ role: 'system', content: 'You are a coding agent.' }];
  for (let turn = 0; turn < turns; turn++) {
    messages.push({ role: 'user', content: `${name}: turn ${turn}` });
    const response = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages }) });
    statuses.push(response.status);
    await response.text();
    messages.push({ role: 'assistant', content: `done ${turn}` });
  }
  return statuses;
}

describe('two replicas and one store', () => {
  it('never send two requests into one llama-server slot at once', async () => {
    const upstream = track(await FakeUpstream.start());
    const llama = new SlotLlama(upstream, { slots: 2, msPerGeneratedToken: 2, generatedTokens: 8 });
    const store = { store: 'redis', redis: { url: redis.url } };
    const [first, second] = [await replica(upstream, store), await replica(upstream, store)];
    const runs = await Promise.all([conversation(first, 'a', 8), conversation(first, 'b', 8), conversation(second, 'c', 8), conversation(second, 'd', 8)]);
    expect(runs.flat().every((status) => status === 200)).toBe(true);
    expect(llama.tasks.length).toBe(32);
    expect(llama.model.counters.busyPins).toBe(0);
  }, 30_000);
});

describe('two replicas in front of a fleet, one store', () => {
  it("route a conversation alike: its home server is the store's, whichever replica its turn reaches", async () => {
    const servers = [track(await FakeUpstream.start()), track(await FakeUpstream.start())];
    for (const server of servers) new SlotLlama(server, { slots: 2 });
    const store = { store: 'redis', redis: { url: redis.url, key_prefix: 'homes-test:' } };
    const [first, second] = [await replica(servers[0]!, store, servers), await replica(servers[0]!, store, servers)];
    const send = async (url: string, name: string, turn: number): Promise<void> => {
      // The history of its turns so far: a conversation is named by its first turn (slots/conversation-key.ts).
      const messages = [{ role: 'system', content: 'You are a coding agent.' }];
      for (let each = 0; each < turn; each++) messages.push({ role: 'user', content: `${name}: turn ${each}` }, { role: 'assistant', content: `done ${each}` });
      messages.push({ role: 'user', content: `${name}: turn ${turn}` });
      const response = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages }) });
      expect(response.status).toBe(200);
      await response.text();
    };
    await send(first, 'a', 0);
    // The second replica homes another conversation first: left to itself, it would put the next new one elsewhere.
    await send(second, 'z', 0);
    await send(second, 'a', 1);
    await send(first, 'a', 2);
    const on = servers.map((server) => server.requestsTo('/v1/chat/completions').map((request) => JSON.stringify(request.json)).filter((text) => text.includes('a: turn 0')).length);
    expect(on.sort()).toEqual([0, 3]);
  }, 30_000);

  it('go on answering with the store down, each with its own homes and slots', async () => {
    const upstream = track(await FakeUpstream.start());
    new SlotLlama(upstream, { slots: 2 });
    const down = await RedisServer.start();
    const store = { store: 'redis', redis: { url: down.url } };
    const [first, second] = [await replica(upstream, store), await replica(upstream, store)];
    await down.close();
    const runs = await Promise.all([conversation(first, 'a', 3), conversation(second, 'b', 3)]);
    expect(runs.flat()).toEqual([200, 200, 200, 200, 200, 200]);
  }, 30_000);
});
