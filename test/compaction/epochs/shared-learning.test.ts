import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { compactorWith, SummarizerDouble } from '../../support/compaction.js';
import { conversation } from '../../support/conversation.js';
import { closedAfterEachTest } from '../../support/proxy.js';
import { RedisServer } from '../../support/redis-server.js';
import { compactOnce, connectedStores } from '../../support/redis-stores.js';

/**
 * Issue 15, items 1 and 2: what one replica learns (the token ratio of a
 * tenant's model, a conversation whose summary failed) reaches the others
 * through the store, read with the epoch lookup. Two engines, each its own
 * memory, on one real redis-server.
 */

const opened = closedAfterEachTest();
const storeOn = connectedStores();

/**
 * With the default 8k window (threshold 6093, soft threshold 4300), this
 * history is past the soft threshold but under the threshold at the initial
 * ratio 1.25, and over it at a ratio of 2.
 */
const BETWEEN_TURNS = 15;

describe('shared learning between replicas', () => {
  it('item 1: a token ratio learned on one replica is used by the other, read with its epoch lookup', async () => {
    const redis = opened(await RedisServer.start());
    const a = compactorWith({}, { store: await storeOn(redis.url) });
    const b = compactorWith({}, { store: await storeOn(redis.url) });
    const alone = compactorWith();
    const messages = conversation({ turns: BETWEEN_TURNS });
    // Replica A learns that the upstream counts twice our estimate, and shares it (the timer's work, done now).
    a.compactor.learn('m', '', 20_000, 10_000);
    await a.compactor.shareRatios();
    expect(b.compactor.ratios.get('m', '')).toBe(1.25);
    await compactOnce(b.compactor, messages);
    expect(b.compactor.ratios.get('m', '')).toBe(2);
    // Used for this very request: sized at 2 it is over the threshold and summarized; a lone replica forwards it.
    expect(b.summarizer.calls).toBe(1);
    expect((await compactOnce(alone.compactor, messages)).changed).toBe(false);
    expect(alone.summarizer.calls).toBe(0);
    // B's own measure, merged in the store's moving average after A's: 2 + 0.3 × (1 - 2) = 1.7.
    b.compactor.learn('m', '', 10_000, 10_000);
    await b.compactor.shareRatios();
    // Read by a third replica, as any reads it (the key holds each share, signed when a secret is set).
    const c = compactorWith({}, { store: await storeOn(redis.url) });
    await compactOnce(c.compactor, messages);
    expect(c.compactor.ratios.get('m', '')).toBeCloseTo(1.7, 10);
  });

  it('item 2: a replica does not retry a summary another replica saw fail within the minute', async () => {
    const redis = opened(await RedisServer.start());
    const failing = new SummarizerDouble();
    failing.failures = 100;
    const a = compactorWith({ compaction: { on_summary_failure: 'forward' } }, { store: await storeOn(redis.url), summarizer: failing });
    const b = compactorWith({ compaction: { on_summary_failure: 'forward' } }, { store: await storeOn(redis.url) });
    const messages = conversation({ turns: 20 });
    expect((await compactOnce(a.compactor, messages)).messages).toEqual(messages);
    expect(failing.calls).toBe(2); // suffix mode, then prepend: one try
    // The failure is told to the store without holding the request: it lands a moment later.
    const raw = new Redis(redis.url);
    for (let tries = 0; (await raw.keys('test:backoff:*')).length === 0 && tries < 500; tries++) await new Promise((resolve) => setTimeout(resolve, 10));
    const [key] = await raw.keys('test:backoff:*');
    expect(await raw.pttl(key!)).toBeGreaterThan(50_000);
    raw.disconnect();
    expect((await compactOnce(b.compactor, messages)).messages).toEqual(messages);
    expect(b.summarizer.calls).toBe(0);
    // A replica with no shared store would have tried it.
    const alone = compactorWith({ compaction: { on_summary_failure: 'forward' } });
    expect((await compactOnce(alone.compactor, messages)).changed).toBe(true);
    expect(alone.summarizer.calls).toBe(1);
  });
});
