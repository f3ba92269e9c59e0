import { afterEach, describe, expect, it } from 'vitest';
import { FakeUpstream } from '../support/fake-upstream.js';
import { closedAfterEachTest } from '../support/proxy.js';
import { RedisServer } from '../support/redis-server.js';
import { drive, post, type Replica, Replicas, simulated } from '../support/replicas.js';

/**
 * Issue 27, item 1: a restarted replica makes the decision any other replica
 * would make for the same request. Three replicas (real processes) on one real
 * redis-server with the default configuration (its 50 ms command timeout
 * included), a long conversation round-robin across them, then one replica
 * restarted: the first request it gets of that conversation reuses the
 * stored epoch with no summary call and forwards what the others forwarded.
 * The request is sent as soon as the new process listens, as a load
 * balancer would (it does not wait for /readyz to say "redis").
 *
 * RESTART_RUNS (default 2) restarts in a row; the 20 are run by hand
 * with RESTART_RUNS=20.
 */

const RUNS = Number(process.env['RESTART_RUNS'] ?? 2);

const opened = closedAfterEachTest();
let replicas: Replicas | undefined;

afterEach(async () => {
  await replicas?.close();
  replicas = undefined;
});

/** Until no replica computes a summary (a background epoch of the last turn may still run). */
async function quiet(urls: readonly string[]): Promise<void> {
  for (let tries = 0; tries < 500; tries++) {
    const running = await Promise.all(urls.map(async (url) => Number(/^compactor_summaries_running (\d+)/m.exec(await (await fetch(`${url}/metrics`)).text())?.[1] ?? 0)));
    if (running.every((count) => count === 0)) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error('summaries never finished');
}

describe('a replica restarted in a long conversation', () => {
  it(`reuses the stored epoch on its first request: 0 summary calls, the same forwarded prompt (${RUNS} restarts in a row)`, { timeout: 60_000 + RUNS * 20_000 }, async () => {
    const redis = opened(await RedisServer.start());
    const upstream = opened(await FakeUpstream.start());
    const llama = await simulated(upstream);
    replicas = new Replicas(upstream, { COMPACTOR_CACHE_STORE: 'redis', COMPACTOR_REDIS_URL: redis.url });
    const started = replicas;
    const running: Replica[] = await Promise.all([0, 1, 2].map(() => started.start()));
    let conversation = await drive((turn) => running[turn % 3]!.url, 60);
    expect(conversation.statuses.every((status) => status === 200)).toBe(true);
    expect(llama.summaryRecords.length).toBeGreaterThan(1);

    const outcomes: string[] = [];
    for (let run = 0; run < RUNS; run++) {
      await quiet(running.map((replica) => replica.url));
      const lastForwarded = llama.chatRecords.at(-1)!;
      const before = llama.records.length;
      // Not the replica that answered last: its background epoch, if any, is not cut short.
      const restarted = (conversation.statuses.length + run + 1) % 3;
      await started.stop(running[restarted]!);
      running[restarted] = await started.start({ ready: false });
      // The same request again, as a client retrying it on the replica just back.
      const response = await post(running[restarted]!.url, conversation.lastRequest);
      await response.text();
      const after = llama.records.slice(before);
      const summaries = after.filter((record) => record.kind === 'summary').length;
      const same = after.at(-1)?.prompt === lastForwarded.prompt;
      outcomes.push(`${response.status} ${summaries} summary call(s) ${same ? 'same prompt' : 'another prompt'}: ${response.headers.get('x-compactor')}`);
      if (process.env['RESTART_DEBUG'] !== undefined && summaries > 0) console.log(running[restarted]!.process.output());
      // Then the conversation goes on across the three of them.
      const from = 61 + run * 3;
      conversation = await drive((turn) => running[turn % 3]!.url, 3, from, conversation.history);
    }
    expect(outcomes).toEqual(outcomes.map(() => expect.stringMatching(/^200 0 summary call\(s\) same prompt: epoch reused/)));
  });
});
