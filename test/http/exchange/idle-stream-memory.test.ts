import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it } from 'vitest';
import { buildApp } from '../../../src/app.js';
import type { ChatPlanner } from '../../../src/http/exchange/planner.js';
import { FakeUpstream, replies } from '../../support/fake-upstream.js';
import { testConfig } from '../../support/proxy.js';

/**
 * What an idle stream holds (issue 26: RSS with 1,000 idle streams): once a
 * request was forwarded, the client's bytes are let go of, so a stream that
 * idles for minutes does not keep a body compactor replaced by another. A
 * count of what is still reachable after a full collection, never a
 * measure of memory or time.
 */

setFlagsFromString('--expose-gc');
const collect = runInNewContext('gc') as () => void;

const CHAT = '/v1/chat/completions';
// A long history the planner below cuts to its last message: what is forwarded is another, smaller body.
const history = Array.from({ length: 40 }, (_, index) => ({ role: index % 2 === 0 ? 'user' : 'assistant', content: `turn ${index} ${'x'.repeat(20_000)}` }));
const body = JSON.stringify({ model: 'm', messages: [...history, { role: 'user', content: 'and now?' }], stream: true });
const keepLast: ChatPlanner = async (context) => ({ body: { ...context.body, messages: context.body.messages.slice(-1) }, report: 'kept the last message' });

const opened: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (opened.length > 0) await opened.pop()!();
});

/** compactor in front of a stalling upstream, with a WeakRef to each client body Fastify parsed. */
async function proxyKeepingRefs(upstream: FakeUpstream): Promise<{ url: string; bodies: Array<WeakRef<object>> }> {
  const app = buildApp(testConfig(upstream.url), { planner: keepLast, logStream: { write: () => undefined } });
  const bodies: Array<WeakRef<object>> = [];
  app.addHook('preHandler', async (incoming) => {
    if (incoming.body instanceof Buffer) bodies.push(new WeakRef(incoming.body));
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  opened.push(() => app.close());
  return { url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, bodies };
}

/** Opens a stream and resolves once its first event came: the answer has begun and idles. */
function openStream(url: string): Promise<() => void> {
  return new Promise((resolve, reject) => {
    const outgoing = request(url + CHAT, { method: 'POST', headers: { 'content-type': 'application/json' }, agent: false });
    outgoing.on('error', () => undefined);
    outgoing.on('response', (response) => {
      if (response.statusCode !== 200) reject(new Error(`status ${response.statusCode}`));
      response.once('data', () => resolve(() => outgoing.destroy()));
    });
    outgoing.end(body);
  });
}

async function fullCollection(): Promise<void> {
  // Twice, a turn apart: WeakRefs deref'd in a job keep their targets until the job ends.
  await new Promise((resolve) => setImmediate(resolve));
  collect();
  await new Promise((resolve) => setImmediate(resolve));
  collect();
}

describe('an idle stream', () => {
  it("holds no client body once the request was forwarded (compactor sent another)", async () => {
    const upstream = await FakeUpstream.start();
    opened.push(() => upstream.close());
    upstream.script(CHAT, replies.stall({ eventsBefore: 1 }));
    const proxy = await proxyKeepingRefs(upstream);
    const streams = [await openStream(proxy.url), await openStream(proxy.url), await openStream(proxy.url)];
    opened.push(async () => streams.forEach((close) => close()));
    // The forwarded body was the planner's: one message, not the client's 41.
    expect(upstream.requestsTo(CHAT).map((sent) => (JSON.parse(sent.body.toString()) as { messages: unknown[] }).messages.length)).toEqual([1, 1, 1]);
    expect(proxy.bodies).toHaveLength(3);
    await fullCollection();
    expect(proxy.bodies.filter((ref) => ref.deref() !== undefined)).toHaveLength(0);
  });

  // What the usage hooks, the dashboard and the error counts read at the answer's end is taken when it is forwarded.
  it.each([
    ['compactor sent another body', keepLast],
    ['the body went as sent', (async () => undefined) satisfies ChatPlanner],
  ])('holds no parsed client body or its messages once forwarded (%s)', async (_, plan) => {
    const upstream = await FakeUpstream.start();
    opened.push(() => upstream.close());
    upstream.script(CHAT, replies.stall({ eventsBefore: 1 }));
    const parsed: Array<WeakRef<object>> = [];
    const planner: ChatPlanner = (context) => {
      parsed.push(new WeakRef(context.body), new WeakRef(context.body.messages));
      return plan(context);
    };
    const app = buildApp(testConfig(upstream.url), { planner, onUsage: () => undefined, logStream: { write: () => undefined } });
    await app.listen({ host: '127.0.0.1', port: 0 });
    opened.push(() => app.close());
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const streams = [await openStream(url), await openStream(url), await openStream(url)];
    opened.push(async () => streams.forEach((close) => close()));
    expect(parsed).toHaveLength(6);
    await fullCollection();
    expect(parsed.filter((ref) => ref.deref() !== undefined)).toHaveLength(0);
  });
});
