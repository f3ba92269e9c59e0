import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryEpochStore } from '../../../src/compaction/epochs/epoch-store.js';
import type { Epoch } from '../../../src/compaction/types.js';
import { leased } from '../../../src/compaction/epochs/lease.js';
import { prefixHashes } from '../../../src/compaction/epochs/prefix-hash.js';
import { RedisEpochStore } from '../../../src/compaction/epochs/redis-store.js';
import type { ChatMessage } from '../../../src/transcript/message.js';
import { closedAfterEachTest } from '../../support/proxy.js';
import { RedisServer } from '../../support/redis-server.js';

/** Issue 15: the Redis epoch store against a real redis-server (started per test, never the system's). */

const opened = closedAfterEachTest();
const stores: RedisEpochStore[] = [];
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
});

const messages: ChatMessage[] = Array.from({ length: 8 }, (_, index) => ({ role: index % 2 === 0 ? 'user' : 'assistant', content: `message ${index} ${'text '.repeat(100)}` }));
const hashes = prefixHashes({ tenant: '', model: 'm' }, messages);

function epochAt(length: number, extra: Partial<Epoch> = {}): Epoch {
  return { key: hashes[length]!, sourceLength: length, seenLength: length, replacement: [{ role: 'user', content: `[compacted:summary] notes up to ${length}` }], notes: `notes up to ${length}`, strategy: 'summary', report: 'summarized', ...extra };
}

/**
 * The fault test needs a command timeout it can outlast with a paused server; the others need one a
 * loaded machine never reaches, or a slow save lands in the writer's memory only and the other replica misses it.
 */
async function storeOn(url: string, faults?: string[]): Promise<RedisEpochStore> {
  const timeoutMs = faults ? 50 : 2_000;
  const store = new RedisEpochStore({ url, keyPrefix: 'test:', ttlMs: 60_000, timeoutMs, memory: new MemoryEpochStore(), onFault: (operation) => faults?.push(operation) });
  stores.push(store);
  // Connected once the first command gets through.
  for (let tries = 0; store.degraded && tries < 200; tries++) await new Promise((resolve) => setTimeout(resolve, 10));
  return store;
}

describe('RedisEpochStore', () => {
  it('shares epochs between replicas: the longest in use, the pending one beyond it, the TTL of the used one refreshed', async () => {
    const redis = opened(await RedisServer.start());
    const [a, b] = [await storeOn(redis.url), await storeOn(redis.url)];
    await a.save(epochAt(3));
    await a.save(epochAt(5, { pending: true }));
    const raw = new Redis(redis.url);
    await raw.pexpire(`test:epoch:${hashes[3]}`, 1_000);
    const found = await b.lookup(hashes);
    expect(found.inUse).toEqual(epochAt(3));
    expect(found.pending).toEqual(epochAt(5, { pending: true }));
    expect(await raw.pttl(`test:epoch:${hashes[3]}`)).toBeGreaterThan(1_000);
    // A truncation keeps its own expiry: it must retry its summary.
    await a.save(epochAt(6, { strategy: 'truncated', expiresAt: Date.now() + 2_000 }));
    expect((await b.lookup(hashes)).inUse?.sourceLength).toBe(6);
    expect(await raw.pttl(`test:epoch:${hashes[6]}`)).toBeLessThanOrEqual(2_000);
    raw.disconnect();
  });

  it('issue 25: a compression epoch reaches another replica byte for byte, its strategy and markers kept, keyed past its source', async () => {
    const redis = opened(await RedisServer.start());
    const [a, b] = [await storeOn(redis.url), await storeOn(redis.url)];
    const replacement: ChatMessage[] = [
      ...messages.slice(0, 3),
      { role: 'tool', tool_call_id: 'c1', content: '[compressed: superseded by call c9, the same read_file call made later (4120 bytes removed)]' },
    ];
    const epoch = epochAt(7, { sourceLength: 4, replacement, notes: null, strategy: 'compress', report: 'compressed 1 tool result (2.0k -> 1.1k tokens)' });
    await a.save(epoch);
    const found = (await b.lookup(hashes)).inUse;
    expect(found).toEqual(epoch);
    expect(JSON.stringify(found?.replacement)).toBe(JSON.stringify(replacement));
  });

  it('a lease is held by one replica at a time; a waiting replica gets the holder\'s epoch, and takes over a lease that expired', async () => {
    const redis = opened(await RedisServer.start());
    const [a, b] = [await storeOn(redis.url), await storeOn(redis.url)];
    const lease = await a.lease(hashes[4]!, 10_000);
    expect(lease).not.toBeNull();
    expect(await b.lease(hashes[4]!, 10_000)).toBeNull();
    const progress: string[] = [];
    let computed = 0;
    const waiting = leased(b, hashes[4]!, { signal: new AbortController().signal, wait: true, onProgress: (line) => progress.push(line), pollMs: 20 }, async () => {
      computed++;
      return null;
    });
    await a.save(epochAt(4));
    await lease!.release();
    expect(await waiting).toEqual(epochAt(4));
    expect(computed).toBe(0);
    expect(progress).toEqual(['compacting (waiting for the summary running on another replica)']);
    // A holder that died: its lease runs out, and the next replica computes.
    expect(await a.lease(hashes[5]!, 50)).not.toBeNull();
    const takenOver = await leased(b, hashes[5]!, { signal: new AbortController().signal, wait: true, pollMs: 20 }, async () => epochAt(5));
    expect(takenOver).toEqual(epochAt(5));
  });

  it('faults: Redis down, paused (slower than the timeout) or flushed: answered from memory, counted, and written back when it is back', async () => {
    const redis = opened(await RedisServer.start());
    const faults: string[] = [];
    const a = await storeOn(redis.url, faults);
    await a.save(epochAt(3));
    const raw = new Redis(redis.url);
    // Slow: every client paused for longer than the 50 ms bound.
    await raw.client('PAUSE', 1_000, 'ALL');
    expect((await a.lookup(hashes)).inUse).toEqual(epochAt(3));
    expect(faults).toContain('lookup');
    raw.disconnect();
    // Flushed (a restart without persistence): memory knows it, and writes it back for the other replicas.
    await redis.kill();
    expect((await a.lookup(hashes)).inUse).toEqual(epochAt(3));
    await a.save(epochAt(4));
    expect(a.degraded).toBe(true);
    await redis.start();
    for (let tries = 0; a.degraded && tries < 500; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      await a.lookup(hashes);
    }
    expect(a.degraded).toBe(false);
    expect((await a.lookup(hashes)).inUse).toEqual(epochAt(4));
    const b = await storeOn(redis.url);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect((await b.lookup(hashes)).inUse).toEqual(epochAt(4));
  });
});
