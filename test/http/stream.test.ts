import { request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { type FakeUpstream, chatStreamEvents, floodingStream, replies } from '../support/fake-upstream.js';
import { loadFixture } from '../support/fixtures.js';
import { postJson } from '../support/http-client.js';
import { type Proxy, sharedForSuite } from '../support/proxy.js';
import { SERVER_COMMENT, SERVER_LINE, parseSse } from '../support/sse.js';

const CHAT = '/v1/chat/completions';
const streamBody = { model: 'm', messages: [{ role: 'user', content: 'Say hi.' }], stream: true, stream_options: { include_usage: true } };

let upstream: FakeUpstream;
let proxy: Proxy;

sharedForSuite({ listen: true, config: { upstream: { timeouts: { idle_ms: 1_000 } } } }, (started) => {
  ({ upstream, proxy } = started);
});
afterEach(() => {
  upstream.reset();
});

/** The data of the last event of a body ('' when there is none). */
function lastEventData(body: Buffer): string {
  return parseSse(body).at(-1)?.data ?? '';
}

describe('streaming', () => {
  it('relays the recorded SSE stream byte for byte, with no-buffering headers, then what the server spent (issue 36)', async () => {
    const answer = await postJson(proxy.url + CHAT, streamBody);
    expect(answer.status).toBe(200);
    expect(answer.ending).toBe('ended');
    expect(answer.body.toString()).toBe(loadFixture('chat_stream').body.toString() + SERVER_COMMENT);
    // Declared in the head, sent after the last chunk (the server's timings are known only then).
    expect(answer.headers['trailer']).toBe('x-compactor');
    expect(answer.trailers?.['x-compactor']).toBe(SERVER_LINE);
    expect(answer.headers['content-type']).toBe('text/event-stream');
    expect(answer.headers['cache-control']).toBe('no-cache');
    expect(answer.headers['x-accel-buffering']).toBe('no');
    expect(answer.headers['keep-alive']).not.toBe('timeout=5, max=100');
  });

  it('relays a stream sent byte by byte, multi-byte characters split, unchanged', async () => {
    const recorded = loadFixture('chat_stream').body;
    expect(recorded.toString()).toMatch(/[陈池จ]/);
    upstream.script(CHAT, replies.sse(recorded, { chunkBytes: 1 }));
    const answer = await postJson(proxy.url + CHAT, streamBody);
    expect(answer.ending).toBe('ended');
    expect(answer.body.toString()).toBe(recorded.toString() + SERVER_COMMENT);
  });

  it('hands each event to the client before the upstream sends the next (no buffering)', async () => {
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    const events = chatStreamEvents({ content: ['first'] });
    upstream.script(CHAT, async ({ response }) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write(events[0]);
      await released;
      for (const event of events.slice(1)) response.write(event);
      response.end();
    });
    const answer = postJson(proxy.url + CHAT, streamBody, {
      onResponse: (response) => {
        response.once('data', (chunk: Buffer) => {
          // The first event arrived while the upstream is still holding the rest.
          expect(chunk.toString()).toBe(events[0]);
          release();
        });
      },
    });
    expect((await answer).body.toString()).toBe(events.join('') + SERVER_COMMENT);
  });

  it('respects backpressure: a client that does not read holds the upstream back', async () => {
    const chunk = Buffer.from(`data: ${JSON.stringify({ choices: [{ delta: { content: 'x'.repeat(16 * 1024) } }] })}\n\n`);
    const total = 4000; // ≈ 64 MiB in all: far more than every socket buffer on the way
    const stream = floodingStream(chunk, total);
    upstream.script(CHAT, stream.reply);
    let received = 0;
    await new Promise<void>((resolve, reject) => {
      const outgoing = request(proxy.url + CHAT, { method: 'POST', headers: { 'content-type': 'application/json' }, agent: false }, (response) => {
        response.pause();
        // Let every buffer fill, then look at how far the upstream got.
        void sleep(1_000).then(() => {
          // Socket buffers on the way hold a few MiB; without backpressure the upstream would be done.
          expect(stream.written()).toBeLessThan((total * chunk.length) / 2);
          response.on('data', (data: Buffer) => (received += data.length));
          response.once('end', resolve);
          response.resume();
        }, reject);
      });
      outgoing.once('error', reject);
      outgoing.end(JSON.stringify(streamBody));
    });
    expect(received).toBe(total * chunk.length + 'data: [DONE]\n\n'.length);
  });
});

describe('a stream the upstream compressed without being asked', () => {
  // compactor does not forward Accept-Encoding on the chat route, but a server (or a proxy before it) may compress anyway.
  const events = chatStreamEvents();
  const gzipped = gzipSync(events.join(''));

  it('is relayed as the upstream sent it, with nothing appended: the client can gunzip a complete answer', async () => {
    upstream.script(CHAT, async ({ response }) => {
      response.writeHead(200, { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' });
      for (let start = 0; start < gzipped.length; start += 100) {
        response.write(gzipped.subarray(start, start + 100));
        await new Promise((resolve) => setImmediate(resolve));
      }
      response.end();
    });
    const answer = await postJson(proxy.url + CHAT, streamBody);
    expect(answer.status).toBe(200);
    expect(answer.ending).toBe('ended');
    expect(answer.headers['content-encoding']).toBe('gzip');
    expect(answer.body.equals(gzipped)).toBe(true);
    expect(gunzipSync(answer.body).toString()).toBe(events.join(''));
    const entry = await proxy.logs.request((line) => line['path'] === CHAT);
    expect(entry['error']).toBeUndefined();
  });

  it('cut short: the client connection breaks, since nothing can be appended to compressed bytes', async () => {
    upstream.script(CHAT, async ({ response }) => {
      response.writeHead(200, { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' });
      response.write(gzipped.subarray(0, 40));
      await sleep(20);
      response.socket?.resetAndDestroy();
    });
    const answer = await postJson(proxy.url + CHAT, streamBody);
    expect(answer.ending).toBe('broken');
    expect(answer.body.equals(gzipped.subarray(0, 40))).toBe(true);
  });
});

describe('a stream with one line of several MB', () => {
  // Longer than what the usage tap holds of a line (MAX_TAPPED_LINE_BYTES, 1 MiB).
  const longLine = `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: 'x'.repeat(5 * 1024 * 1024) } }] })}\n\n`;

  it('relays it byte for byte, and still sees the [DONE] after it', async () => {
    const events = chatStreamEvents();
    const body = Buffer.from(events.slice(0, 2).join('') + longLine + events.slice(2).join(''));
    upstream.script(CHAT, replies.sse(body, { chunkBytes: 64 * 1024 }));
    const answer = await postJson(proxy.url + CHAT, streamBody);
    expect(answer.ending).toBe('ended');
    expect(answer.body.toString()).toBe(body.toString() + SERVER_COMMENT);
  });

  it('still says so when the stream stops after it without [DONE]', async () => {
    const body = Buffer.from(chatStreamEvents()[0]! + longLine.slice(0, -2));
    upstream.script(CHAT, replies.sse(body, { chunkBytes: 64 * 1024 }));
    const answer = await postJson(proxy.url + CHAT, streamBody);
    expect(answer.body.subarray(0, body.length).equals(body)).toBe(true);
    expect(answer.body.subarray(body.length).toString()).toMatch(/^\n\ndata: \{"error".*"code":"upstream_stream_incomplete"\}\}\n\n$/);
  });
});

describe('an upstream that fails mid-stream', () => {
  it('reset: the client gets the events so far, then an error event, and no [DONE]', async () => {
    upstream.script(CHAT, replies.resetMidStream({ eventsBefore: 3 }));
    const answer = await postJson(proxy.url + CHAT, streamBody);
    expect(answer.status).toBe(200);
    expect(answer.ending).toBe('ended');
    const text = answer.body.toString();
    expect(text.startsWith(parseSse(loadFixture('chat_stream').body).slice(0, 3).map((event) => event.raw).join(''))).toBe(true);
    expect(text).not.toContain('[DONE]');
    expect(JSON.parse(lastEventData(answer.body))).toEqual({
      error: { message: expect.stringContaining('broke off'), type: 'server_error', param: null, code: 'upstream_stream_failed' },
    });
  });

  it('reset inside an event: the error event still stands on its own', async () => {
    const events = chatStreamEvents();
    const cut = events.slice(0, 2).join('') + events[2]!.slice(0, 25);
    upstream.script(CHAT, async ({ response }) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write(cut);
      await sleep(20);
      response.socket?.resetAndDestroy();
    });
    const answer = await postJson(proxy.url + CHAT, streamBody);
    const text = answer.body.toString();
    expect(text.startsWith(cut)).toBe(true);
    expect(text.endsWith('"code":"upstream_stream_failed"}}\n\n')).toBe(true);
    expect(text.slice(cut.length).startsWith('\n\ndata: {"error"')).toBe(true);
  });

  it("llama-server's own error event passes through as it came, with nothing appended", async () => {
    upstream.script(CHAT, replies.fixture('chat_stream_midstream_error'));
    const answer = await postJson(proxy.url + CHAT, streamBody);
    expect(answer.body.equals(loadFixture('chat_stream_midstream_error').body)).toBe(true);
  });

  it('a stall longer than upstream.timeouts.idle_ms ends with a timeout error event', async () => {
    upstream.script(CHAT, replies.stall({ eventsBefore: 2 }));
    const answer = await postJson(proxy.url + CHAT, streamBody);
    expect(answer.ending).toBe('ended');
    expect(answer.body.toString()).not.toContain('[DONE]');
    expect(lastEventData(answer.body)).toContain('"code":"upstream_timeout"');
    await upstream.waitFor(() => upstream.requestsTo(CHAT)[0]?.abortedAt !== null, { what: 'the stalled request to be closed' });
  });

  it('a stream that ends without [DONE] is not passed off as complete', async () => {
    upstream.script(CHAT, replies.sse(chatStreamEvents().slice(0, -1)));
    const answer = await postJson(proxy.url + CHAT, streamBody);
    expect(lastEventData(answer.body)).toContain('"code":"upstream_stream_incomplete"');
  });

  it('a JSON answer past what is read whole (8 MiB) is relayed as it comes, whole, its head without the server seconds', async () => {
    const answer = { choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: 'x'.repeat(9 * 1024 * 1024) } }], timings: { prompt_ms: 420, predicted_ms: 1100 } };
    const bytes = Buffer.from(JSON.stringify(answer));
    upstream.script(CHAT, async ({ response }) => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': String(bytes.length) });
      // In pieces: the limit is crossed mid-body, the rest comes after the head.
      for (let at = 0; at < bytes.length; at += 1024 * 1024) response.write(bytes.subarray(at, at + 1024 * 1024));
      response.end();
    });
    const relayed = await postJson(proxy.url + CHAT, { ...streamBody, stream: false });
    expect(relayed.status).toBe(200);
    expect(relayed.ending).toBe('ended');
    expect(relayed.body.equals(bytes)).toBe(true);
    expect(relayed.headers['x-compactor']).toBeUndefined();
  });

  it('a JSON answer cut short never passes for a whole one: read whole before its head, it becomes a 502 in the chat error shape', async () => {
    upstream.script(CHAT, async ({ response }) => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
      response.write('{"choices":[');
      await sleep(20);
      response.socket?.resetAndDestroy();
    });
    const answer = await postJson(proxy.url + CHAT, { ...streamBody, stream: false });
    expect(answer.ending).toBe('ended');
    expect(answer.status).toBe(502);
    expect(JSON.parse(answer.body.toString())).toMatchObject({ error: { type: 'server_error', code: 'upstream_stream_failed' } });
  });
});

describe('aborts', () => {
  it('a client that leaves mid-stream aborts the upstream request', async () => {
    upstream.script(CHAT, replies.stall({ eventsBefore: 1 }));
    const outgoing = request(proxy.url + CHAT, { method: 'POST', headers: { 'content-type': 'application/json' }, agent: false });
    outgoing.on('error', () => undefined);
    outgoing.on('response', (response) => response.once('data', () => outgoing.destroy()));
    outgoing.end(JSON.stringify(streamBody));
    await upstream.waitFor(() => upstream.requestsTo(CHAT)[0]?.abortedAt != null, { what: 'the upstream request to be aborted' });
    const entry = await proxy.logs.request((line) => line['path'] === CHAT);
    expect(entry).toMatchObject({ status: 200, error: 'client_closed', aborted: true });
  });

  it('a client that leaves before the headers aborts the upstream request too', async () => {
    upstream.script(CHAT, replies.slowHeaders(60_000));
    const outgoing = request(proxy.url + CHAT, { method: 'POST', headers: { 'content-type': 'application/json' }, agent: false });
    outgoing.on('error', () => undefined);
    outgoing.end(JSON.stringify(streamBody));
    await upstream.waitFor(() => upstream.requestsTo(CHAT).length === 1, { what: 'the request to arrive' });
    outgoing.destroy();
    await upstream.waitFor(() => upstream.requestsTo(CHAT)[0]?.abortedAt != null, { what: 'the upstream request to be aborted' });
  });
});
