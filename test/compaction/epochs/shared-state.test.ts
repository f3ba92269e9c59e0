import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { compactorWith, SummarizerDouble } from '../../support/compaction.js';
import { conversation } from '../../support/conversation.js';
import { FakeUpstream } from '../../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../../support/proxy.js';
import { RedisServer } from '../../support/redis-server.js';
import { compactOnce, connectedStores } from '../../support/redis-stores.js';
import { SimulatedLlama } from '../../support/simulated-llama.js';

/**
 * Issue 27, item 3: what replicas share follows what happened, wherever it
 * happened. A summary that succeeds ends the conversation's back-off on every
 * replica, not only its own; measures a replica has not sent yet when it
 * stops are sent in its shutdown drain.
 */

const opened = closedAfterEachTest();
const storeOn = connectedStores();

/** A plain client for the test's own reads, disconnected after the test. */
function rawOn(url: string): Redis {
  const raw = new Redis(url);
  opened({ close: async () => raw.disconnect() });
  return raw;
}

async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let tries = 0; tries < 200; tries++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`never: ${what}`);
}

describe('shared state that follows what happened', () => {
  it('a summary that succeeds on one replica clears the back-off another replica set, there and in the store', async () => {
    const redis = opened(await RedisServer.start());
    const raw = rawOn(redis.url);
    const failing = new SummarizerDouble();
    const config = { compaction: { on_summary_failure: 'forward' } };
    const a = compactorWith(config, { store: await storeOn(redis.url), summarizer: failing });
    const b = compactorWith(config, { store: await storeOn(redis.url) });
    // B starts the summary of the longer history, slowly; meanwhile A's summary of the shorter one fails.
    b.summarizer.delayMs = 400;
    const longer = compactOnce(b.compactor, conversation({ turns: 22 }));
    await until(async () => b.summarizer.calls > 0, 'B summarizes');
    failing.failures = 100;
    await compactOnce(a.compactor, conversation({ turns: 20 }));
    expect(a.compactor.backoff.size).toBe(1);
    await until(async () => (await raw.keys('test:backoff:*')).length === 1, 'the back-off is shared');
    expect((await longer).epoch).toBe('new');
    // B's success ends the back-off in the store…
    await until(async () => (await raw.keys('test:backoff:*')).length === 0, 'the back-off is cleared in the store');
    // …and on A, once its next lookup of the conversation reads it.
    failing.failures = 0;
    await compactOnce(a.compactor, conversation({ turns: 23 }));
    expect(a.compactor.backoff.size).toBe(0);
  });

  it('ratio measures not sent yet when a replica stops are sent in its shutdown drain', async () => {
    const redis = opened(await RedisServer.start());
    const upstream = opened(await FakeUpstream.start());
    new SimulatedLlama(upstream, { window: 8192 });
    const proxy = await startProxy(upstream, { listen: true, config: { compaction: { enabled: true }, cache: { store: 'redis', redis: { url: redis.url, key_prefix: 'test:', timeout_ms: 2_000 } } } });
    const messages = conversation({ turns: 3 });
    const response = await fetch(`${proxy.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'sim', messages }) });
    expect(response.status).toBe(200);
    await response.text();
    const raw = rawOn(redis.url);
    // Well within the 2 s between two shares: nothing sent yet.
    expect(await raw.keys('test:ratio:*')).toEqual([]);
    await proxy.close();
    expect(await raw.keys('test:ratio:*')).toHaveLength(1);
  });
});
