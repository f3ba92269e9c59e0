import { Readable } from 'node:stream';
import { request } from 'undici';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ArrivingScan, scanBody } from '../../src/formats/body-scan.js';
import { receiveBody } from '../../src/http/edge/body-receiver.js';
import type { FastifyRequest } from 'fastify';
import { PARSE_AHEAD_BYTES } from '../../src/formats/parse-ahead.js';
import { FakeUpstream, replies } from '../support/fake-upstream.js';
import { largeJoins } from '../support/joins.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';

/**
 * Issue 34, the 50 ms `/healthz` target, first step: a large body is taken
 * off the connection a chunk at a time into one buffer of its declared
 * length, and scanned where each chunk landed (src/http/edge/body-receiver.ts),
 * rather than kept as chunks until the last one and then copied into one
 * buffer at once (Fastify's `parseAs: 'buffer'`: 50–100 ms of a held loop
 * for 32 MiB on a busy machine) and scanned again from the start. Copies and
 * scans are counted, never timed.
 */

const opened = closedAfterEachTest();
afterEach(() => vi.restoreAllMocks());

const CHUNK = 64 * 1024;
const call = (id: string) => ({ id, type: 'function', function: { name: 'f', arguments: '{}' } });

/** An agent loop of `steps` steps, about `bytes` long. */
function agentBody(steps: number, bytes: number): string {
  const pad = 'p'.repeat(Math.max(1, Math.floor(bytes / steps) - 120));
  const messages: unknown[] = [{ role: 'user', content: 'go' }];
  for (let index = 0; index < steps; index++) messages.push({ role: 'assistant', content: '', tool_calls: [call(`c${index}`)] }, { role: 'tool', tool_call_id: `c${index}`, content: `ok ${pad}` });
  return JSON.stringify({ model: 'm', messages });
}

/** `text` as a socket brings it: chunks of 64 KiB. */
const inChunks = (text: string): Readable => {
  const bytes = Buffer.from(text);
  return Readable.from((function* () {
    for (let at = 0; at < bytes.length; at += CHUNK) yield bytes.subarray(at, at + CHUNK);
  })());
};

async function post(url: string, body: string, chunked = false): Promise<{ status: number; text: string }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (!chunked) headers['content-length'] = String(Buffer.byteLength(body));
  const answer = await request(url, { method: 'POST', headers, body: inChunks(body) });
  return { status: answer.statusCode, text: await answer.body.text() };
}

describe('issue 34: a large body is scanned where it arrives, never joined at once', () => {
  it('a 4 MiB body sent in 64 KiB chunks is forwarded as it came with no join of a MiB or more', async () => {
    const upstream = opened(await FakeUpstream.start());
    upstream.route('POST', '/v1/chat/completions', replies.chat());
    const proxy = opened(await startProxy(upstream, { listen: true }));
    const body = agentBody(400, 4 * PARSE_AHEAD_BYTES);
    const joins = largeJoins(PARSE_AHEAD_BYTES);
    const answer = await post(`${proxy.url}/v1/chat/completions`, body);
    expect(answer.status).toBe(200);
    expect(upstream.requests[0]!.body.toString()).toBe(body);
    expect(joins.largest).toBe(0);
  });

  it('a 4 MiB body sent chunked (no Content-Length) is joined a MiB at a time, not at once', async () => {
    const upstream = opened(await FakeUpstream.start());
    upstream.route('POST', '/v1/chat/completions', replies.chat());
    const proxy = opened(await startProxy(upstream, { listen: true }));
    const body = agentBody(400, 4 * PARSE_AHEAD_BYTES);
    const joins = largeJoins(PARSE_AHEAD_BYTES);
    const answer = await post(`${proxy.url}/v1/chat/completions`, body, true);
    expect(answer.status).toBe(200);
    expect(upstream.requests[0]!.body.toString()).toBe(body);
    expect(joins.largest).toBe(0);
  });

  it('past limits.max_values the rest of the body is dropped as it arrives, and the 413 is in the route\'s own shape', async () => {
    const upstream = opened(await FakeUpstream.start());
    const proxy = opened(await startProxy(upstream, { listen: true, config: { limits: { max_values: 100_000 } } }));
    const body = `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"go"}],"x":[${'{},'.repeat(1_999_999)}{}]}`;
    const joins = largeJoins(PARSE_AHEAD_BYTES);
    const allocated = vi.spyOn(Buffer, 'allocUnsafe');
    const answer = await post(`${proxy.url}/v1/messages`, body);
    expect(answer.status).toBe(413);
    // Anthropic's error shape (https://docs.anthropic.com/en/api/errors): {"type":"error","error":{"type":…,"message":…}}.
    expect(JSON.parse(answer.text)).toMatchObject({ type: 'error', error: { message: expect.stringContaining('limits.max_values') } });
    expect(joins.largest).toBe(0);
    // One buffer of the declared length, made once the first MiB came; none made later for the rest.
    expect(allocated.mock.calls.filter(([size]) => size >= PARSE_AHEAD_BYTES)).toHaveLength(1);
    expect(upstream.requests).toHaveLength(0);
  });

  it('scanned as it arrives, cut anywhere (inside a string, an escape, a key), it finds what a scan of the whole finds', async () => {
    const big = 'x'.repeat(PARSE_AHEAD_BYTES);
    const bodies = [
      `{"model":"m","m\\u0065ssages":[{"role":"user","content":"${big}"}, {"role":"tool","content":[{"type":"text","text":"]},{\\"["}]} ]}`,
      `{"messages":"first","model":"m","messages":[ {"role":"user","content":"a \\\\\\" ] , b"} ,{"role":"user","content":"${big}","n":[1,[2,{"k":[3]}]],"o":{"content":[1,2]}} ] , "tail":{"messages":[1]}}`,
      `{"model":"m","messages":[{"role":"user","content":"é ✓ 😀 \\\\"},{"role":"user","content":"${big}\\\\\\\\\\""}],"seed":1e400}`,
      `{"model":"m","messages":[{"role":"user","content":"unclosed ${big}`,
    ];
    const bounds = { maxItems: Number.POSITIVE_INFINITY, maxValues: Number.POSITIVE_INFINITY };
    for (const [index, text] of bodies.entries()) {
      const raw = Buffer.from(text);
      const whole = await scanBody(raw, 'messages', bounds, async () => undefined);
      // Cuts at every byte of the first 300 (keys, escapes, the start of the large string), then every 7,919 bytes.
      for (const step of [1, 3, 7_919]) {
        const scan = new ArrivingScan(raw, 'messages', bounds);
        const end = step === 7_919 ? raw.length : 300;
        for (let at = step; at < end; at += step) {
          scan.arrived(at);
          while (scan.behind) scan.arrived(at);
        }
        scan.arrived(raw.length);
        while (scan.behind) scan.arrived(raw.length);
        expect(scan.result(), `body ${index}, cut every ${step}`).toEqual(whole);
      }
    }
  });

  it('scans at most a MiB per turn of the loop, never in the data handler, however many chunks one turn brings', async () => {
    // libuv reads a socket up to 32 times (64 KiB each) before it runs anything else: here 64 chunks in one turn.
    const body = Buffer.from(agentBody(400, 4 * PARSE_AHEAD_BYTES));
    const payload = new Readable({ read() {} });
    const request = { headers: { 'content-length': String(body.length) }, routeOptions: { config: { listKey: 'messages' } }, arrival: null } as unknown as FastifyRequest;
    const received = receiveBody(request, payload, { bodyBytes: 32 * PARSE_AHEAD_BYTES, bounds: { maxItems: 50_000, maxValues: 500_000 } });
    for (let at = 0; at < body.length; at += CHUNK) payload.push(body.subarray(at, at + CHUNK));
    payload.push(null);
    let turns = 0;
    let done = false;
    const counting = (async () => {
      while (!done) {
        await new Promise((resolve) => setImmediate(resolve));
        turns++;
      }
    })();
    const bytes = await received;
    done = true;
    await counting;
    expect(bytes.equals(body)).toBe(true);
    expect(request.arrival?.scan).toMatchObject({ followed: true, items: 1_201 });
    // 4 MiB scanned a MiB per turn: at least 4 turns before the body is handed on.
    expect(turns).toBeGreaterThanOrEqual(4);
  });
});
