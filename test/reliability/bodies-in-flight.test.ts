import { describe, expect, it } from 'vitest';
import { BodiesInFlightError } from '../../src/errors.js';
import { BodyBudget } from '../../src/http/edge/body-budget.js';
import { PARSE_AHEAD_BYTES } from '../../src/formats/parse-ahead.js';
import { FakeUpstream, type FakeReply, replies } from '../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';

const opened = closedAfterEachTest();

/**
 * Issue 34 item 2, `limits.in_flight_bytes`: four uncounted 28.6 MiB bodies
 * at once took 3.8 GB, six got no answer. The large bodies being read and
 * planned take their bytes from one bound; past it a newcomer waits its
 * turn, then gets a 503 in its format's shape. Order and waits are counted
 * (the budget's queue, the upstream's requests), never timed.
 */

describe('limits.in_flight_bytes', () => {
  it('a body that does not fit waits for the one before it, first come first served; one body always fits', async () => {
    const budget = new BodyBudget(100, 60_000);
    const first = await budget.take(60);
    const order: string[] = [];
    const second = budget.take(60).then((release) => (order.push('second'), release));
    const third = budget.take(30).then((release) => (order.push('third'), release));
    expect(budget.waiting).toBe(2);
    first();
    const releases = await Promise.all([second, third]);
    expect(order).toEqual(['second', 'third']);
    for (const release of releases) release();
    // Larger than the whole bound, alone: let in.
    (await budget.take(500))();
    expect(budget.waiting).toBe(0);
  });

  it('a body that waited too long is refused with a BodiesInFlightError naming the key', async () => {
    const budget = new BodyBudget(100, 0);
    const held = await budget.take(80);
    await expect(budget.take(80)).rejects.toBeInstanceOf(BodiesInFlightError);
    await expect(budget.take(80)).rejects.toThrow('limits.in_flight_bytes');
    expect(budget.waiting).toBe(0);
    held();
  });

  it('/v1/compact takes its place beside the chat route\'s large bodies: past the bound it gets its 503 (it drew on nothing before)', async () => {
    const upstream = opened(await FakeUpstream.start());
    // The chat request's upstream answers once told: until then its large body holds its place.
    let arrived!: () => void;
    const chatArrived = new Promise<void>((resolve) => (arrived = resolve));
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => (answer = resolve));
    const held: FakeReply = async (exchange) => {
      arrived();
      await answered;
      await replies.chat()(exchange);
    };
    upstream.route('POST', '/v1/chat/completions', held);
    const proxy = opened(await startProxy(upstream, { config: { compaction: { enabled: false }, limits: { in_flight_bytes: 2 * PARSE_AHEAD_BYTES } }, deps: { bodyWaitMs: 0 } }));
    const payload = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'p'.repeat(1.5 * PARSE_AHEAD_BYTES) }] });
    const headers = { 'content-type': 'application/json' };
    const chat = proxy.app.inject({ method: 'POST', url: '/v1/chat/completions', headers, payload });
    await chatArrived;
    const compacted = await proxy.app.inject({ method: 'POST', url: '/v1/compact', headers, payload });
    expect(compacted.statusCode).toBe(503);
    expect(compacted.json()).toMatchObject({ error: { code: 'too_many_bodies_in_flight', message: expect.stringContaining('limits.in_flight_bytes') } });
    answer();
    expect((await chat).statusCode).toBe(200);
    // Its place given back, the same compact request is read.
    expect((await proxy.app.inject({ method: 'POST', url: '/v1/compact', headers, payload })).statusCode).toBe(200);
  });
});
