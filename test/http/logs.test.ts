import { describe, expect, it } from 'vitest';
import { FakeUpstream, replies } from '../support/fake-upstream.js';
import { send, postJson } from '../support/http-client.js';
import { type Proxy, closedAfterEachTest, sharedForSuite, startProxy } from '../support/proxy.js';
import { SERVER_LINE } from '../support/sse.js';
import { SimulatedLlama } from '../support/simulated-llama.js';
import { AGENT_TOOLS, runAgent } from '../e2e/agent-run.js';

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

    const lines = await proxy.logs.requestLines(10);
    expect(upstream.requestsTo(CHAT)[0]?.headers.authorization).toBe(`Bearer ${CANARY_UPSTREAM_KEY}`);
    expect(proxy.logs.text).not.toContain(CANARY_KEY);
    expect(proxy.logs.text).not.toContain(CANARY_UPSTREAM_KEY);
    expect(proxy.logs.text).not.toContain(CANARY_PROMPT);
    // Sanity: the lines are there, with what they should say.
    // The stream reset mid-way (8th) ended in compactor's error event: logged with its 502, not the 200 sent first.
    expect(lines.map((line) => line['status'])).toEqual([200, 200, 200, 400, 400, 401, 400, 502, 200, 502]);
    expect(lines[7]).toMatchObject({ sentStatus: 200, error: 'upstream_stream_failed' });
    expect(lines[0]).toMatchObject({ method: 'POST', route: 'chat', path: CHAT, status: 200, repairs: 0, bytes: expect.any(Number), upstreamMs: expect.any(Number) });
    expect(lines[2]).toMatchObject({ repairs: 1 });
    expect(lines[8]).toMatchObject({ route: 'passthrough', path: '/tokenize' });
  });

  it('say what the x-compactor header says: the repairs, with their kinds', async () => {
    const answer = await postJson(
      proxy.url + CHAT,
      {
        model: 'm',
        messages: [
          { role: 'user', content: CANARY_PROMPT },
          { role: 'tool', tool_call_id: CANARY_PROMPT, content: CANARY_PROMPT },
          { role: 'assistant', content: '', tool_calls: [{ id: 'call-1', type: 'function', function: { name: 'bash', arguments: '{}' } }] },
          { role: 'user', content: 'and a call left unanswered' },
        ],
      },
      { headers: { authorization: `Bearer ${CANARY_KEY}` } },
    );
    expect(answer.headers['x-compactor']).toBe(`repaired 2 tool pairs; ${SERVER_LINE}`);
    const line = await proxy.logs.request((entry) => entry['compaction'] !== undefined);
    expect(line).toMatchObject({ compaction: 'repaired 2 tool pairs', repairs: 2, repairKinds: { orphan: 1, missing: 1 } });
    expect(proxy.logs.text).not.toContain(CANARY_PROMPT);
  });

  it("count in bytes what the client received, compactor's own error answers and error events included", async () => {
    const authorized = { authorization: `Bearer ${CANARY_KEY}`, 'content-type': 'application/json' };
    const chat = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    const already = proxy.logs.requests().length;
    const received: number[] = [];
    const exchange = async (path: string, headers: Record<string, string>, body: string): Promise<void> => {
      const answer = await send(proxy.url + path, { method: 'POST', headers, body });
      received.push(answer.body.length);
      await proxy.logs.requestLines(already + received.length);
    };
    await exchange(CHAT, { ...authorized, authorization: 'Bearer wrong' }, chat); // 401
    await exchange(CHAT, authorized, '{"model":'); // 400, not JSON
    await exchange(CHAT, { ...authorized, 'content-type': 'text/plain' }, 'hello'); // 415
    upstream.script(CHAT, replies.resetMidStream());
    await exchange(CHAT, authorized, JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] })); // 200, then an error event
    upstream.script(CHAT, replies.hangUp());
    await exchange(CHAT, authorized, chat); // 502
    const lines = proxy.logs.requests().slice(already);
    expect(lines.map((line) => line['status'])).toEqual([401, 400, 415, 502, 502]);
    expect(received.every((bytes) => bytes > 0)).toBe(true);
    expect(lines.map((line) => line['bytes'])).toEqual(received);
  });
});

describe('logs of compacted requests', () => {
  const opened = closedAfterEachTest();

  it('say what the x-compactor header says: epoch reused, pruned, summarized', async () => {
    const upstream = opened(await FakeUpstream.start());
    new SimulatedLlama(upstream, { window: 8192 });
    const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true } } }));
    const exchanges = await runAgent({ baseUrl: proxy.url, turns: 12, stepsPerTurn: 2, resultBytes: 1500, tools: AGENT_TOOLS });
    // The header ends with what the server spent (issue 36), which the log line carries as prefillMs / decodeMs.
    const serverPart = /(?:; )?server \d+\.\d\d s prefill, \d+\.\d\d s decode$/;
    expect(exchanges.every((exchange) => exchange.report !== null && serverPart.test(exchange.report))).toBe(true);
    const reports = exchanges.map((exchange) => exchange.report!.replace(serverPart, '') || null);
    expect(reports.some((report) => report?.startsWith('epoch reused'))).toBe(true);
    await proxy.logs.requestLines(exchanges.length);
    expect(proxy.logs.requests().map((line) => line['compaction'] ?? null)).toEqual(reports);
    expect(proxy.logs.requests().every((line) => typeof line['prefillMs'] === 'number' && typeof line['decodeMs'] === 'number')).toBe(true);
  });
});
