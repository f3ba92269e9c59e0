import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryEpochStore } from '../../../src/compaction/epochs/epoch-store.js';
import { prefixHashes, tenantOf } from '../../../src/compaction/epochs/prefix-hash.js';
import { RedisEpochStore } from '../../../src/compaction/epochs/redis-store.js';
import { INITIAL_TOKEN_RATIO } from '../../../src/compaction/sizes/token-ratio.js';
import { parseConfig } from '../../../src/config/schema.js';
import { headLength } from '../../../src/transcript/groups.js';
import { estimateRequestTokens } from '../../../src/transcript/tokens.js';
import { compactorWith } from '../../support/compaction.js';
import { conversation } from '../../support/conversation.js';
import { closedAfterEachTest } from '../../support/proxy.js';
import { RedisServer } from '../../support/redis-server.js';
import { compactOnce } from '../../support/redis-stores.js';

/**
 * Issue 34 item 4: with `cache.redis.secret` set, every value compactor reads
 * from Redis is signed and checked, the learned ratios and back-offs as much
 * as the epochs; and the tenant in a key's name is a digest keyed per
 * deployment, never the credential's plain digest (the same in every
 * deployment). Against a real redis-server, written to as anyone with access
 * to it could.
 */

const opened = closedAfterEachTest();
const stores: RedisEpochStore[] = [];
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
});

const SECRET = 'a secret of at least sixteen characters';

async function storeOn(url: string, options: { secret?: string; keySalt?: string; now?: () => number } = {}): Promise<{ store: RedisEpochStore; bad: string[] }> {
  const bad: string[] = [];
  const store = new RedisEpochStore({ url, keyPrefix: 'test:', ttlMs: 60_000, timeoutMs: 2_000, memory: new MemoryEpochStore(), onBadValue: (reason) => bad.push(reason), ...options });
  stores.push(store);
  for (let tries = 0; store.degraded && tries < 500; tries++) await new Promise((resolve) => setTimeout(resolve, 10));
  return { store, bad };
}

function rawOn(url: string): Redis {
  const raw = new Redis(url);
  opened({ close: async () => raw.disconnect() });
  return raw;
}

/** The history: about 2.3k estimated tokens, under the soft threshold (4300) at the initial ratio, over the threshold (6093) at 4. */
function historyOfAbout2300Tokens() {
  const turns = Array.from({ length: 40 }, (_, index) => index + 2).find((count) => {
    const estimate = estimateRequestTokens({ messages: conversation({ turns: count }) });
    return estimate >= 2_000 && estimate * INITIAL_TOKEN_RATIO < 4300 && estimate * 4 > 6093;
  });
  expect(turns).toBeDefined();
  return conversation({ turns: turns! });
}

describe('issue 34 item 4: learned values are signed too', () => {
  it('a ratio of 4 written unsigned beside signed epochs is ignored: a fresh replica does not summarize a 2.3k-token history on an 8k window', async () => {
    const redis = opened(await RedisServer.start());
    const raw = rawOn(redis.url);
    // A genuine replica shares a ratio of 1, so the key exists under its real name.
    const a = compactorWith({}, { store: (await storeOn(redis.url, { secret: SECRET })).store });
    a.compactor.learn('m', '', 10_000, 10_000);
    await a.compactor.shareRatios();
    const keys = await raw.keys('test:ratio:*');
    expect(keys).toHaveLength(1);
    // Someone with write access replaces it with a plain 4.
    await raw.del(keys[0]!);
    await raw.set(keys[0]!, '4', 'PX', 60_000);
    const b = await storeOn(redis.url, { secret: SECRET });
    const replica = compactorWith({}, { store: b.store });
    const answered = await compactOnce(replica.compactor, historyOfAbout2300Tokens());
    expect(replica.summarizer.calls).toBe(0);
    expect(answered.changed).toBe(false);
    expect(replica.compactor.ratios.get('m', '')).toBe(INITIAL_TOKEN_RATIO);
    expect(b.bad).toContain('unsigned');
  });

  it('a back-off written unsigned is ignored: the conversation\'s summary is still tried', async () => {
    const redis = opened(await RedisServer.start());
    const raw = rawOn(redis.url);
    const messages = conversation({ turns: 20 });
    const hashes = prefixHashes({ tenant: '', model: 'm' }, messages);
    const conversationName = hashes[Math.min(headLength(messages) + 1, messages.length)]!;
    await raw.set(`test:backoff:${conversationName}`, '1', 'PX', 60_000);
    const b = await storeOn(redis.url, { secret: SECRET });
    const replica = compactorWith({ compaction: { on_summary_failure: 'forward' } }, { store: b.store });
    const answered = await compactOnce(replica.compactor, messages);
    expect(replica.summarizer.calls).toBe(1);
    expect(answered.changed).toBe(true);
    expect(b.bad).toContain('unsigned');
  });
});

describe('issue 34 item 4: a signed value holds only where it was written', () => {
  it('signed shares copied from one tenant\'s ratio to another\'s do not verify there', async () => {
    const redis = opened(await RedisServer.start());
    const raw = rawOn(redis.url);
    const [mallory, alice] = [tenantOf({ authorization: 'Bearer mallory' }), tenantOf({ authorization: 'Bearer alice' })];
    const writer = compactorWith({}, { store: (await storeOn(redis.url, { secret: SECRET })).store });
    writer.compactor.learn('m', mallory, 40_000, 10_000);
    await writer.compactor.shareRatios();
    const [malloryKey] = await raw.keys('test:ratio:*');
    writer.compactor.learn('m', alice, 10_000, 10_000);
    await writer.compactor.shareRatios();
    const aliceKey = (await raw.keys('test:ratio:*')).find((key) => key !== malloryKey)!;
    await raw.del(aliceKey);
    for (const entry of await raw.lrange(malloryKey!, 0, -1)) await raw.rpush(aliceKey, entry);
    const reader = await storeOn(redis.url, { secret: SECRET });
    expect(await reader.store.learning!.read(alice, 'm', 'a conversation')).toEqual({ backoffMs: 0 });
    expect(reader.bad).toEqual(['signature']);
    expect((await reader.store.learning!.read(mallory, 'm', 'a conversation')).ratio).toBe(4);
  });

  it('a back-off ends when its signed end comes, whatever TTL its key was given since', async () => {
    const redis = opened(await RedisServer.start());
    const raw = rawOn(redis.url);
    let time = 1_000_000;
    const writer = await storeOn(redis.url, { secret: SECRET, now: () => time });
    await writer.store.learning!.noteFailure('a conversation', 60_000);
    const [key] = await raw.keys('test:backoff:*');
    await raw.pexpire(key!, 3_600_000);
    const reader = await storeOn(redis.url, { secret: SECRET, now: () => time });
    expect((await reader.store.learning!.read('', 'm', 'a conversation')).backoffMs).toBe(60_000);
    time += 61_000;
    expect((await reader.store.learning!.read('', 'm', 'a conversation')).backoffMs).toBe(0);
    expect(await raw.pttl(key!)).toBeGreaterThan(60_000);
  });
});

describe('issue 34 item 4: tenant ids in key names are keyed digests', () => {
  it('one credential in two deployments (another secret, or another cache.redis.key_salt) gets two key names, neither showing its tenant id', async () => {
    const redis = opened(await RedisServer.start());
    const raw = rawOn(redis.url);
    const tenant = tenantOf({ authorization: 'Bearer sk-the-same-in-both' });
    const deployments = [{ secret: SECRET }, { secret: 'another secret, also sixteen+' }, { secret: SECRET, keySalt: 'a salt of sixteen characters or more' }];
    for (const deployment of deployments) {
      const replica = compactorWith({}, { store: (await storeOn(redis.url, deployment)).store });
      replica.compactor.learn('m', tenant, 10_000, 10_000);
      await replica.compactor.shareRatios();
    }
    const keys = await raw.keys('test:ratio:*');
    expect(keys).toHaveLength(3);
    for (const key of keys) expect(key).not.toContain(tenant);
  });

  it('cache.redis.key_salt is a configuration key of 16 characters or more', () => {
    expect(parseConfig({ cache: { redis: { key_salt: 'a salt of sixteen characters or more' } } })).toMatchObject({ ok: true, config: { cache: { redis: { key_salt: 'a salt of sixteen characters or more' } } } });
    expect(parseConfig({ cache: { redis: { key_salt: 'short' } } })).toMatchObject({ ok: false, errors: [expect.stringMatching(/^cache\.redis\.key_salt: expected at least 16 characters/)] });
  });
});
