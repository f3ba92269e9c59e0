import { describe, expect, it, vi } from 'vitest';
import { digestCalls } from '../../support/counted-digests.js';
import { FakeUpstream } from '../../support/fake-upstream.js';
import { closedAfterEachTest, startProxy, type Proxy } from '../../support/proxy.js';

/**
 * Issue 40: compactor's fixed per-request work. An agent resends its whole
 * history every step; a request that compactor does not change (the fast
 * path) hashed every message of it again for the prefix-break ledger, and
 * the dashboard hashed its head again. Counted here as calls into
 * node:crypto's digests, for the second request of a conversation: it must
 * not grow with the history the first request already sent (only the new
 * messages and the head are hashed). A count, never a time.
 */

vi.mock('node:crypto', async (importOriginal) => (await import('../../support/counted-digests.js')).countedCrypto(importOriginal));

const opened = closedAfterEachTest();
const CHAT = '/v1/chat/completions';

function history(steps: number): Array<Record<string, unknown>> {
  const messages: Array<Record<string, unknown>> = [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: 'Fix the failing tests.' },
  ];
  for (let step = 1; step <= steps; step++) {
    messages.push({ role: 'assistant', content: null, tool_calls: [{ id: `call_${step}`, type: 'function', function: { name: 'read_file', arguments: `{"path":"src/${step}.ts"}` } }] });
    messages.push({ role: 'tool', tool_call_id: `call_${step}`, content: `export const value${step} = ${step};\n`.repeat(2) });
  }
  return messages;
}

/** Waits for the dashboard to count `requests` answers: the answer's hooks (ledger, dashboard) run a turn after it. */
async function answered(proxy: Proxy, requests: number): Promise<void> {
  for (let turn = 0; turn < 1_000; turn++) {
    const state = (await proxy.app.inject({ method: 'GET', url: '/dashboard/state' })).json() as { totals: { requests: number } };
    if (state.totals.requests >= requests) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
  throw new Error(`the dashboard never counted ${requests} answers`);
}

/** Digests taken for the second request of a conversation of `steps` tool steps, which adds one step to the first. */
async function digestsOfNextRequest(steps: number): Promise<number> {
  const upstream = opened(await FakeUpstream.start());
  // Compaction on, with its defaults: in a 128k window (the recorded /props says 2,048) both histories are far under
  // the threshold, so each request takes the fast path.
  const proxy = opened(await startProxy(upstream, { config: { compaction: { enabled: true }, models: { m: { context_window: 131_072 } } } }));
  const send = async (messages: Array<Record<string, unknown>>): Promise<void> => {
    const answer = await proxy.app.inject({ method: 'POST', url: CHAT, headers: { 'content-type': 'application/json', authorization: 'Bearer sk-test' }, payload: { model: 'm', messages } });
    expect(answer.statusCode).toBe(200);
  };
  const first = history(steps);
  await send([...first, { role: 'user', content: 'go on' }]);
  await answered(proxy, 1);
  const next = [...first, { role: 'user', content: 'go on' }, ...history(steps + 1).slice(-2), { role: 'user', content: 'and now?' }];
  const before = digestCalls.count;
  await send(next);
  await answered(proxy, 2);
  return digestCalls.count - before;
}

describe('hashing per request (issue 40)', () => {
  it('the next request of a conversation hashes as much with 10 earlier steps as with 60: only what is new', async () => {
    const short = await digestsOfNextRequest(10);
    const long = await digestsOfNextRequest(60);
    expect(short).toBeGreaterThan(0);
    expect(long).toBe(short);
  });
});
