import { describe, expect, it } from 'vitest';
import { type FakeUpstream, replies } from '../support/fake-upstream.js';
import { type Proxy, sharedForSuite } from '../support/proxy.js';

const CHAT = '/v1/chat/completions';
const CANARY_KEY = 'sk-canary-7c1e4b0d9a';
const CANARY_UPSTREAM_KEY = 'sk-upstream-canary-51f2';
const CANARY_PROMPT = 'canary-prompt-Zebra-Quartz-0451';

let upstream: FakeUpstream;
let proxy: Proxy;

const PROXY_OPTIONS = {
  listen: true,
  config: { log: { level: 'trace' }, auth: { keys: [CANARY_KEY] }, upstream: { api_key: CANARY_UPSTREAM_KEY } },
};
sharedForSuite(PROXY_OPTIONS, (started) => {
  ({ upstream, proxy } = started);
});

describe('logs', () => {
  it('never hold a key or the message text, at any level', async () => {
    const headers = {
      authorization: `Bearer ${CANARY_KEY}`,
      cookie: `session=${CANARY_KEY}`,
      'x-api-key': CANARY_KEY,
      'content-type': 'application/json',
    };
    const chat = { model: 'm', messages: [{ role: 'user', content: CANARY_PROMPT }] };
    const post = (payload: string, extra: Record<string, string> = {}) =>
      fetch(proxy.url + CHAT, { method: 'POST', headers: { ...headers, ...extra }, body: payload }).then((response) => response.text());

    await post(JSON.stringify(chat));
    await post(JSON.stringify({ ...chat, stream: true, stream_options: { include_usage: true } }));
    await post(JSON.stringify({ ...chat, messages: [...chat.messages, { role: 'tool', tool_call_id: CANARY_PROMPT, content: CANARY_PROMPT }] }));
    await post(`{"model":"m","messages":[{"role":"user","content":"${CANARY_PROMPT}"`); // not JSON: the parser quotes it
    await post(JSON.stringify({ model: 7, messages: [{ role: CANARY_PROMPT }] }));
    await post(JSON.stringify(chat), { authorization: `Bearer ${CANARY_KEY}-wrong` });
    upstream.script(CHAT, replies.json(400, { error: { message: `bad: ${CANARY_PROMPT}`, type: 'invalid_request_error' } }));
    await post(JSON.stringify(chat));
    upstream.script(CHAT, replies.resetMidStream());
    await post(JSON.stringify({ ...chat, stream: true }));
    await fetch(`${proxy.url}/tokenize?key=${CANARY_KEY}`, { method: 'POST', headers, body: JSON.stringify({ content: CANARY_PROMPT }) }).then((r) => r.text());
    upstream.script(CHAT, replies.hangUp());
    await post(JSON.stringify(chat));

    const lines = await waitForLines(10);
    expect(upstream.requestsTo(CHAT)[0]?.headers.authorization).toBe(`Bearer ${CANARY_UPSTREAM_KEY}`);
    expect(proxy.logs.text).not.toContain(CANARY_KEY);
    expect(proxy.logs.text).not.toContain(CANARY_UPSTREAM_KEY);
    expect(proxy.logs.text).not.toContain(CANARY_PROMPT);
    // Sanity: the lines are there, with what they should say.
    expect(lines.map((line) => line['status'])).toEqual([200, 200, 200, 400, 400, 401, 400, 200, 200, 502]);
    expect(lines[0]).toMatchObject({ method: 'POST', route: 'chat', path: CHAT, status: 200, repairs: 0, bytes: expect.any(Number), upstreamMs: expect.any(Number) });
    expect(lines[2]).toMatchObject({ repairs: 1 });
    expect(lines[8]).toMatchObject({ route: 'passthrough', path: '/tokenize' });
  });
});

async function waitForLines(count: number): Promise<Record<string, unknown>[]> {
  for (let attempt = 0; attempt < 500; attempt++) {
    const lines = proxy.logs.requests();
    if (lines.length >= count) return lines;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`expected ${count} request lines, got ${proxy.logs.requests().length}`);
}
