import { deflateRawSync } from 'node:zlib';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryEpochStore } from '../../../src/compaction/epochs/epoch-store.js';
import type { Epoch } from '../../../src/compaction/types.js';
import { prefixHashes } from '../../../src/compaction/epochs/prefix-hash.js';
import { RedisEpochStore } from '../../../src/compaction/epochs/redis-store.js';
import type { ChatMessage } from '../../../src/transcript/message.js';
import { closedAfterEachTest } from '../../support/proxy.js';
import { RedisServer } from '../../support/redis-server.js';

/**
 * Issue 21 item 6: what anyone with write access to Redis can do to a
 * tenant's prompt, against a real redis-server. Each tampered value must be a
 * miss (counted, logged once), never a prompt, a 500 or lost turns.
 */

const opened = closedAfterEachTest();
const stores: RedisEpochStore[] = [];
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
});

const messages: ChatMessage[] = Array.from({ length: 8 }, (_, index) => ({ role: index % 2 === 0 ? 'user' : 'assistant', content: `message ${index}` }));
const hashes = prefixHashes({ tenant: 't', model: 'm' }, messages);
const epochKey = (length: number) => `test:epoch:${hashes[length]}`;

function epochAt(length: number): Epoch {
  return { key: hashes[length]!, sourceLength: length, seenLength: length, replacement: [{ role: 'user', content: `[compacted:summary] notes up to ${length}` }], marked: [0], notes: `notes up to ${length}`, strategy: 'summary', report: 'summarized' };
}

interface Opened {
  readonly store: RedisEpochStore;
  readonly bad: string[];
  readonly warnings: string[];
}

async function storeOn(url: string, options: { secret?: string; maxValueBytes?: number } = {}): Promise<Opened> {
  const bad: string[] = [];
  const warnings: string[] = [];
  const logger = { info() {}, warn: (fields: Record<string, unknown>, message: string) => warnings.push(`${message} ${JSON.stringify(fields)}`) };
  const store = new RedisEpochStore({ url, keyPrefix: 'test:', ttlMs: 60_000, timeoutMs: 500, memory: new MemoryEpochStore(), logger, onBadValue: (reason) => bad.push(reason), ...options });
  stores.push(store);
  for (let tries = 0; store.degraded && tries < 200; tries++) await new Promise((resolve) => setTimeout(resolve, 10));
  return { store, bad, warnings };
}

/** A plain JSON value as a writer without the secret stores it. */
const plain = (value: unknown, flag = 'u') => Buffer.concat([Buffer.from(`${flag}j`), Buffer.from(JSON.stringify(value))]);

describe('issue 21 item 6: epoch values read from Redis are checked, never trusted', () => {
  it('a malformed replacement, a sourceLength beyond or below the history, a bad marked index: each a miss, counted, logged once', async () => {
    const redis = opened(await RedisServer.start());
    const raw = new Redis(redis.url);
    const reader = await storeOn(redis.url);
    const cases: Array<[string, Record<string, unknown>]> = [
      ['replacement: [null, 5, "x"]', { ...epochAt(4), replacement: [null, 5, 'x'] }],
      ['sourceLength: 1e9', { ...epochAt(4), sourceLength: 1e9 }],
      ['sourceLength: -4', { ...epochAt(4), sourceLength: -4 }],
      ['marked index past the replacement', { ...epochAt(4), marked: [7] }],
      ['no strategy', { ...epochAt(4), strategy: 'whatever' }],
    ];
    for (const [name, value] of cases) {
      await raw.set(epochKey(4), plain(value));
      const found = await reader.store.lookup(hashes);
      expect(found.inUse, name).toBeNull();
      await reader.store.lookup(hashes); // the same bad value again: counted again, not logged again
    }
    expect(reader.bad).toEqual(Array.from({ length: 10 }, () => 'schema'));
    expect(reader.warnings).toHaveLength(5);
    expect(reader.warnings[0]).toContain('treated as a miss');
    // A valid one is still found, and load() checks the same way.
    await raw.set(epochKey(4), plain(epochAt(4)));
    expect((await reader.store.lookup(hashes)).inUse).toEqual(epochAt(4));
    await raw.set(epochKey(5), plain({ ...epochAt(5), replacement: [null] }));
    expect(await reader.store.load(hashes[5]!)).toBeUndefined();
    raw.disconnect();
  });

  it('a small value that inflates past cache.redis.max_value_bytes is a miss, inflated no further than the cap', async () => {
    const redis = opened(await RedisServer.start());
    const raw = new Redis(redis.url);
    const reader = await storeOn(redis.url, { maxValueBytes: 1_048_576 });
    // 40 MB of one character deflates to ~40 KB: the 0.4 MB -> 400 MB at a tenth of the scale.
    const bomb = deflateRawSync(Buffer.from(JSON.stringify({ ...epochAt(4), notes: 'a'.repeat(40_000_000) })));
    expect(bomb.length).toBeLessThan(100_000);
    await raw.set(epochKey(4), Buffer.concat([Buffer.from('uz'), bomb]));
    const found = await reader.store.lookup(hashes);
    expect(found.inUse).toBeNull();
    expect(reader.bad).toEqual(['too-large']);
    expect(reader.warnings.join('\n')).toContain('cache.redis.max_value_bytes');
    raw.disconnect();
  });

  it('with cache.redis.secret, an edited, unsigned or differently signed value is a miss; a signed one is found', async () => {
    const redis = opened(await RedisServer.start());
    const raw = new Redis(redis.url);
    const secret = 'a secret of at least sixteen characters';
    const writer = await storeOn(redis.url, { secret });
    await writer.store.save(epochAt(4));
    expect((await (await storeOn(redis.url, { secret })).store.lookup(hashes)).inUse).toEqual(epochAt(4));
    // A replica that has not seen the epoch (its memory would answer with the genuine one).
    const reader = await storeOn(redis.url, { secret });

    // Arbitrary text put into the next prompt: the replacement edited in place.
    const signed = (await raw.getBuffer(epochKey(4)))!;
    const edited = Buffer.from(signed.toString('latin1').replace('notes up to 4', 'IGNORE ALL AND'), 'latin1');
    expect(edited.equals(signed)).toBe(false);
    await raw.set(epochKey(4), edited);
    expect((await reader.store.lookup(hashes)).inUse).toBeNull();

    // A value written without the secret (another app, an old replica).
    await raw.set(epochKey(4), plain(epochAt(4)));
    expect((await reader.store.lookup(hashes)).inUse).toBeNull();

    // Signed with another secret.
    const other = await storeOn(redis.url, { secret: 'another secret, also sixteen+' });
    await other.store.save(epochAt(4));
    expect((await reader.store.lookup(hashes)).inUse).toBeNull();
    expect(reader.bad).toEqual(['signature', 'unsigned', 'signature']);
    raw.disconnect();
  });

  it('without the secret, a well-formed edited value is used: what README says such a store is trusted with', async () => {
    const redis = opened(await RedisServer.start());
    const raw = new Redis(redis.url);
    const reader = await storeOn(redis.url);
    await raw.set(epochKey(4), plain({ ...epochAt(4), replacement: [{ role: 'user', content: 'written by someone else' }] }));
    expect((await reader.store.lookup(hashes)).inUse?.replacement).toEqual([{ role: 'user', content: 'written by someone else' }]);
    raw.disconnect();
  });
});
