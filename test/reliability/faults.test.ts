import { type IncomingMessage, type ServerResponse, request } from 'node:http';
import { type Server, type Socket, createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/schema.js';
import { compactorWith } from '../support/compaction.js';
import { conversation } from '../support/conversation.js';
import { FakeUpstream, chatStreamEvents, floodingStream, replies } from '../support/fake-upstream.js';
import { postJson, send } from '../support/http-client.js';
import { manualClock } from '../support/manual-clock.js';
import { type Proxy, sharedForSuite, startProxy } from '../support/proxy.js';
import { SimulatedLlama } from '../support/simulated-llama.js';
import { SERVER_COMMENT, sseData } from '../support/sse.js';
import { chatRequestView } from '../../src/formats/chat/read.js';

/**
 * Issue 7, "Faults": each request ends in exactly one terminal state, and
 * nothing leaks. Timing rows ("within 100 ms", "within 1 s") are measured and
 * printed; the bounds asserted are generous, since CI machines are noisy.
 * Rows already covered elsewhere are named in test/reliability/README.md.
 */

const CHAT = '/v1/chat/completions';
const simple = { model: 'm', messages: [{ role: 'user', content: 'Say hi.' }] };
const streamed = { ...simple, stream: true };

let upstream: FakeUpstream;
let proxy: Proxy;

sharedForSuite({ listen: true, config: { upstream: { timeouts: { idle_ms: 1_000 } } } }, (started) => {
  ({ upstream, proxy } = started);
});
afterEach(async () => {
  // Whatever happened, the proxy holds no upstream request any more.
  await waitUntil(() => proxy.app.proxy.upstream.activeRequests === 0, 'no upstream request in flight');
  upstream.reset();
});

async function waitUntil(predicate: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

function errorOf(body: Buffer): { code: string; message: string; type: string } {
  return (JSON.parse(body.toString()) as { error: { code: string; message: string; type: string } }).error;
}

/** The data of each SSE event of a body, as a lenient client decodes it. */
function dataEvents(text: string): string[] {
  return sseData(text, { dispatchAtEnd: true });
}

describe('an upstream that cannot be reached', () => {
  it('refuses connections: 502 at once (measured; DESIGN asks within 100 ms), naming no address', async () => {
    upstream.refuseConnections();
    const started = performance.now();
    const answer = await postJson(proxy.url + CHAT, simple);
    const elapsed = performance.now() - started;
    console.info(`refused connection answered 502 in ${elapsed.toFixed(1)} ms`);
    expect(answer.status).toBe(502);
    expect(errorOf(answer.body)).toMatchObject({ code: 'upstream_unreachable', type: 'server_error' });
    expect(answer.body.toString()).not.toContain(String(upstream.port));
    expect(elapsed).toBeLessThan(2_000);
  });

  describe('a connect that never completes (a blackhole)', () => {
    // A server that takes the TCP connection and never says a word: TLS never completes, so the
    // connect phase hangs as it does for a dropped SYN, on any machine (no route to a blackhole needed).
    let silent: Server;
    const sockets = new Set<Socket>();
    let blackhole: Proxy;
    beforeAll(async () => {
      silent = createServer((socket) => {
        sockets.add(socket);
        socket.on('error', () => undefined);
      });
      await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
      const port = (silent.address() as { port: number }).port;
      blackhole = await startProxy(upstream, { listen: true, config: { upstream: { url: `https://127.0.0.1:${port}`, timeouts: { connect_ms: 300 } } } });
    });
    afterAll(async () => {
      await blackhole.close();
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    });

    it('504 after upstream.timeouts.connect_ms, not before, naming no address', async () => {
      const started = performance.now();
      const answer = await postJson(blackhole.url + CHAT, streamed);
      const elapsed = performance.now() - started;
      console.info(`blackholed connect answered ${answer.status} after ${elapsed.toFixed(0)} ms (connect_ms 300; undici's connect timer is coarse)`);
      expect(answer.status).toBe(504);
      expect(errorOf(answer.body)).toMatchObject({ code: 'upstream_timeout', message: expect.stringContaining('connect_ms') });
      expect(answer.body.toString()).not.toMatch(/127\.0\.0\.1|attempted address/);
      expect(elapsed).toBeGreaterThanOrEqual(290);
      expect(elapsed).toBeLessThan(5_000);
    });
  });
});

describe('a slow upstream', () => {
  it('headers that take long still succeed: the defaults wait 10 minutes for them, 5 between chunks', async () => {
    // Local models read long prompts for minutes before the first byte: the defaults allow it.
    const { headers_ms: headersMs, idle_ms: idleMs } = defaultConfig().upstream.timeouts;
    expect(headersMs).toBeGreaterThanOrEqual(5 * 60_000);
    expect(idleMs).toBeGreaterThanOrEqual(5 * 60_000);
    // The same in small: headers after 1.5 s with headers_ms at 3 s (the unit stands for minutes).
    const slow = await startProxy(upstream, { listen: true, config: { upstream: { timeouts: { headers_ms: 3_000 } } } });
    try {
      upstream.script(CHAT, replies.slowHeaders(1_500), replies.slowHeaders(1_500));
      const [json, stream] = await Promise.all([postJson(slow.url + CHAT, simple), postJson(slow.url + CHAT, streamed)]);
      expect(json.status).toBe(200);
      expect(stream.status).toBe(200);
      expect(stream.body.toString().endsWith(`data: [DONE]\n\n${SERVER_COMMENT}`)).toBe(true);
    } finally {
      await slow.close();
    }
  });

  it('a stream that stalls before its first event ends with an SSE error at the idle timeout, never a hang', async () => {
    upstream.script(CHAT, replies.stall({ eventsBefore: 0 }));
    const started = performance.now();
    const answer = await postJson(proxy.url + CHAT, streamed);
    expect(performance.now() - started).toBeGreaterThanOrEqual(900);
    expect(answer.status).toBe(200);
    expect(answer.ending).toBe('ended');
    expect(dataEvents(answer.body.toString()).map((data) => (JSON.parse(data) as { error: { code: string } }).error.code)).toEqual(['upstream_timeout']);
    await upstream.waitFor(() => upstream.requestsTo(CHAT)[0]?.abortedAt != null, { what: 'the stalled request to be closed' });
  });
});

describe('upstream resets', () => {
  const events = chatStreamEvents({ content: ['a', 'b', 'c'] });
  for (const eventsBefore of [0, 1, events.length - 1]) {
    it(`after ${eventsBefore} events: the client gets them, then an error event, never [DONE]`, async () => {
      upstream.script(CHAT, replies.resetMidStream({ eventsBefore, events }));
      const answer = await postJson(proxy.url + CHAT, streamed);
      const received = dataEvents(answer.body.toString());
      expect(received.slice(0, eventsBefore)).toEqual(dataEvents(events.slice(0, eventsBefore).join('')));
      expect(received).toHaveLength(eventsBefore + 1);
      expect((JSON.parse(received.at(-1)!) as { error: { code: string } }).error.code).toBe('upstream_stream_failed');
      expect(answer.body.toString()).not.toContain('[DONE]');
    });
  }

  it('before the headers: 502 in OpenAI shape, and no retry', async () => {
    upstream.script(CHAT, replies.hangUp());
    const answer = await postJson(proxy.url + CHAT, streamed);
    expect(answer.status).toBe(502);
    expect(errorOf(answer.body).code).toBe('upstream_unreachable');
    expect(upstream.requestsTo(CHAT)).toHaveLength(1);
  });
});

describe('upstream error statuses', () => {
  const cases: Array<[number, string]> = [
    [400, 'exceed_context_size_error'],
    [429, 'rate_limit_exceeded'],
    [503, 'unavailable_error'],
  ];
  for (const [status, type] of cases) {
    for (const stream of [false, true]) {
      it(`${status} with Retry-After (${stream ? 'streamed' : 'JSON'} request): passed through as it came, not retried`, async () => {
        const body = { error: { code: status, message: `upstream says ${status}`, type } };
        upstream.script(CHAT, replies.json(status, body, { 'retry-after': '17' }));
        const answer = await postJson(proxy.url + CHAT, { ...simple, stream });
        expect(answer.status).toBe(status);
        expect(answer.headers['retry-after']).toBe('17');
        expect(JSON.parse(answer.body.toString())).toEqual(body);
        await sleep(50);
        expect(upstream.requestsTo(CHAT)).toHaveLength(1);
      });
    }
  }

  it('an HTML page, even with status 200 on a streamed request: 502 in OpenAI shape, its text hidden', async () => {
    upstream.script(CHAT, ({ response }) => {
      response.writeHead(200, { 'content-type': 'text/html' });
      response.end('<html><body>Welcome to nginx at 10.1.2.3</body></html>');
    });
    const answer = await postJson(proxy.url + CHAT, streamed);
    expect(answer.status).toBe(502);
    expect(errorOf(answer.body)).toMatchObject({ code: 'upstream_bad_response', type: 'server_error' });
    expect(answer.body.toString()).not.toMatch(/nginx|10\.1\.2\.3|<html/);
  });
});

describe('an upstream that sends 100 Continue unasked', () => {
  // compactor never sends Expect: 100-continue, but some servers (and proxies before them) answer every
  // request with a 100 first. HTTP clients must skip any 1xx before the final answer (RFC 9110 §15.2), as
  // Node's http client does; undici skips the others but failed on a 100, which became a 502.
  const events = chatStreamEvents();
  const completion = JSON.stringify({ choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }] });
  const models = JSON.stringify({ object: 'list', data: [{ id: 'm', object: 'model' }] });
  let server: Server;
  const sockets = new Set<Socket>();
  let continuing: Proxy;
  /** How each request was answered: the 100 in one piece or cut in two writes (so compactor sees half a head). */
  let splitContinue = false;

  /** The answer after the 100: an SSE stream (chunked), or JSON with a Content-Length. */
  function finalAnswer(path: string, body: string): string {
    if (path.startsWith('/v1/models')) return `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(models)}\r\n\r\n${models}`;
    if (!body.includes('"stream":true')) return `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(completion)}\r\n\r\n${completion}`;
    const chunks = events.map((event) => `${Buffer.byteLength(event).toString(16)}\r\n${event}\r\n`).join('');
    return `HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n${chunks}0\r\n\r\n`;
  }

  beforeAll(async () => {
    // A raw HTTP/1.1 server: reads each request on a kept-alive connection and answers 100, then the real answer.
    server = createServer((socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
      let pending = Buffer.alloc(0);
      socket.on('data', (chunk: Buffer) => {
        pending = Buffer.concat([pending, chunk]);
        for (;;) {
          const headEnd = pending.indexOf('\r\n\r\n');
          if (headEnd === -1) return;
          const head = pending.subarray(0, headEnd).toString('latin1');
          const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
          if (pending.length < headEnd + 4 + length) return;
          const body = pending.subarray(headEnd + 4, headEnd + 4 + length).toString('utf8');
          pending = pending.subarray(headEnd + 4 + length);
          const path = head.split(' ')[1] ?? '/';
          const answer = finalAnswer(path, body);
          if (splitContinue) {
            socket.write('HTTP/1.1 10');
            setTimeout(() => socket.write(`0 Continue\r\nx-note: more to come\r\n\r\n${answer}`), 20);
          } else {
            socket.write(`HTTP/1.1 100 Continue\r\n\r\n${answer}`);
          }
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    continuing = await startProxy(upstream, { listen: true, config: { upstream: { url: `http://127.0.0.1:${port}` } } });
  });
  afterAll(async () => {
    await continuing.close();
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  for (const split of [false, true]) {
    const how = split ? 'cut in two writes' : 'in one piece';
    it(`chat route, ${how}: the streamed and the JSON answer come through whole, on one kept-alive connection`, async () => {
      splitContinue = split;
      const stream = await postJson(continuing.url + CHAT, streamed);
      expect(stream.status).toBe(200);
      // The stream whole, then compactor's last comment with what the server spent (issue 36).
      expect(stream.body.toString()).toBe(events.join('') + SERVER_COMMENT);
      const json = await postJson(continuing.url + CHAT, simple);
      expect(json.status).toBe(200);
      expect(json.body.toString()).toBe(completion);
      // Again: the 100 of a request on a reused connection is skipped too.
      const again = await postJson(continuing.url + CHAT, streamed);
      expect(again.body.toString()).toBe(events.join('') + SERVER_COMMENT);
      expect(sockets.size).toBe(1);
    });

    it(`passthrough, ${how}: the answer comes through whole`, async () => {
      splitContinue = split;
      for (let round = 0; round < 2; round++) {
        const answer = await send(`${continuing.url}/v1/models`);
        expect(answer.status).toBe(200);
        expect(answer.body.toString()).toBe(models);
      }
      const posted = await send(`${continuing.url}/v1/models`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"x":1}' });
      expect(posted.body.toString()).toBe(models);
    });
  }
});

describe('SSE as any server may frame it', () => {
  const payloads = chatStreamEvents({ content: ['Hel', 'lo 😀', ' 陈'] }).map((event) => event.slice('data: '.length, -2));
  // What compactor appends to a whole stream that ended at an event boundary (issue 36): the server's seconds of
  // chatStreamEvents' timings (prompt_ms 1.2, predicted_ms 8.2) as an SSE comment. Anywhere else it would join the
  // last event, so nothing is appended there (the x-compactor trailer carries them alone).
  const SERVER_COMMENT = ': server 0.00 s prefill, 0.01 s decode\n\n';
  const framings: Array<[string, string, string]> = [
    ['LF', payloads.map((data) => `data: ${data}\n\n`).join(''), SERVER_COMMENT],
    ['CRLF', payloads.map((data) => `data: ${data}\r\n\r\n`).join(''), SERVER_COMMENT],
    // After a CR a client may take a following LF into the same line end: nothing is appended.
    ['CR', payloads.map((data) => `data: ${data}\r\r`).join(''), ''],
    ['mixed endings, comments, no space after the colon', payloads.map((data, index) => `: keep-alive ${index}\r\ndata:${data}\n\r\n`).join(''), SERVER_COMMENT],
    ['no blank line after the last event', payloads.map((data) => `data: ${data}`).join('\n\n') + '\n', ''],
    ['no line end at all after [DONE]', payloads.map((data) => `data: ${data}`).join('\n\n'), ''],
  ];
  for (const [name, body, appended] of framings) {
    it(`${name}, sent one byte at a time: the client gets the same bytes, then at most compactor's closing comment`, async () => {
      upstream.script(CHAT, replies.sse(Buffer.from(body), { chunkBytes: 1 }));
      const answer = await postJson(proxy.url + CHAT, streamed);
      expect(answer.ending).toBe('ended');
      expect(answer.body.toString()).toBe(body + appended);
      // Strict clients and lenient ones (which dispatch an event the stream did not end) alike.
      for (const dispatchAtEnd of [false, true]) {
        expect(sseData(answer.body.toString(), { dispatchAtEnd })).toEqual(sseData(body, { dispatchAtEnd }));
      }
      expect(dataEvents(body)).toHaveLength(payloads.length);
    });
  }
});

describe('clients that leave', () => {
  /** Opens a chat request by hand; `destroy` closes the client's connection. */
  function open(body: unknown, options: { onResponse?: (response: IncomingMessage) => void; bodyBytes?: number } = {}) {
    const bytes = Buffer.from(JSON.stringify(body));
    const outgoing = request(proxy.url + CHAT, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': String(bytes.length) },
      agent: false,
    });
    outgoing.on('error', () => undefined);
    outgoing.on('response', (response) => {
      response.on('error', () => undefined);
      options.onResponse?.(response);
    });
    if (options.bodyBytes === undefined) outgoing.end(bytes);
    else outgoing.write(bytes.subarray(0, options.bodyBytes));
    return outgoing;
  }

  async function abortedWithin(path: string, leftAt: number): Promise<number> {
    await upstream.waitFor(() => upstream.requestsTo(path).some((received) => received.abortedAt !== null), { what: 'the upstream to see the close' });
    const abortedAt = upstream.requestsTo(path).find((received) => received.abortedAt !== null)!.abortedAt!;
    return abortedAt - leftAt;
  }

  it('during the upload: nothing is sent upstream, the request is logged as aborted', async () => {
    const big = { ...simple, messages: [{ role: 'user', content: 'x'.repeat(200_000) }] };
    const outgoing = open(big, { bodyBytes: 50_000 });
    await sleep(100);
    outgoing.destroy();
    const line = await proxy.logs.request((entry) => entry['path'] === CHAT && entry['aborted'] === true);
    expect(line).toMatchObject({ route: 'chat', aborted: true });
    expect(upstream.requests).toHaveLength(0);
  });

  it('while waiting for the headers: the upstream sees the close (measured; DESIGN asks within 1 s)', async () => {
    upstream.script(CHAT, replies.slowHeaders(60_000));
    const outgoing = open(streamed);
    await upstream.waitFor(() => upstream.requestsTo(CHAT).length === 1, { what: 'the request' });
    const leftAt = Date.now();
    outgoing.destroy();
    const delay = await abortedWithin(CHAT, leftAt);
    console.info(`client left while waiting for headers: upstream saw the close after ${delay} ms`);
    expect(delay).toBeLessThan(1_000);
    expect(await proxy.logs.request((entry) => entry['path'] === CHAT)).toMatchObject({ error: 'client_closed', aborted: true });
  });

  it('mid-stream: the upstream sees the close (measured; DESIGN asks within 1 s)', async () => {
    upstream.script(CHAT, replies.sse(chatStreamEvents({ content: Array.from({ length: 200 }, (_, index) => `t${index}`) }), { delayMs: 20 }));
    let leftAt = 0;
    const outgoing = open(streamed, {
      onResponse: (response) =>
        response.once('data', () => {
          leftAt = Date.now();
          outgoing.destroy();
        }),
    });
    const delay = await abortedWithin(CHAT, await (async () => (await waitUntil(() => leftAt > 0, 'the first event'), leftAt))());
    console.info(`client left mid-stream: upstream saw the close after ${delay} ms`);
    expect(delay).toBeLessThan(1_000);
  });

  it('during a summary call: the summary request is aborted too (measured; DESIGN asks within 1 s), nothing left running', async () => {
    const summaryUpstream = await FakeUpstream.start();
    const llama = new SimulatedLlama(summaryUpstream, { window: 8192, summaryDelayMs: 30_000 });
    const compacting = await startProxy(summaryUpstream, { listen: true, config: { compaction: { enabled: true } } });
    try {
      const outgoing = request(compacting.url + CHAT, { method: 'POST', headers: { 'content-type': 'application/json' }, agent: false });
      outgoing.on('error', () => undefined);
      outgoing.end(JSON.stringify({ model: 'sim', messages: conversation({ turns: 22 }), stream: true }));
      await summaryUpstream.waitFor(() => summaryUpstream.requestsTo(CHAT).length === 1, { what: 'the summary request' });
      const leftAt = Date.now();
      outgoing.destroy();
      await summaryUpstream.waitFor(() => summaryUpstream.requestsTo(CHAT)[0]!.abortedAt !== null, { what: 'the summary request to be aborted' });
      const delay = summaryUpstream.requestsTo(CHAT)[0]!.abortedAt! - leftAt;
      console.info(`client left during the summary: the summary request was closed after ${delay} ms`);
      expect(delay).toBeLessThan(1_000);
      await waitUntil(() => compacting.app.proxy.engine!.runningSummaries === 0, 'no summary running');
      await waitUntil(() => compacting.app.proxy.upstream.activeRequests === 0, 'no upstream request in flight');
      expect(llama.chatRecords).toHaveLength(0);
    } finally {
      await compacting.close();
      await summaryUpstream.close();
    }
  });
});

describe('a client reading at 1 KB/s', () => {
  it('at most ~1 MiB is held for it inside compactor, and the upstream is held back', async () => {
    const event = Buffer.from(`data: ${JSON.stringify({ choices: [{ delta: { content: 'x'.repeat(8 * 1024) } }] })}\n\n`);
    const total = 4_000; // ≈ 32 MiB: more than every socket buffer on the way
    const stream = floodingStream(event, total);
    upstream.script(CHAT, stream.reply);
    // The proxy's side of the client connection: what Node holds in memory for it.
    let proxied: ServerResponse | undefined;
    const capture = (_request: unknown, response: ServerResponse): void => {
      proxied = response;
    };
    proxy.app.server.on('request', capture);
    let largestHeld = 0;
    let received = 0;
    try {
      await new Promise<void>((resolve, reject) => {
        const outgoing = request(proxy.url + CHAT, { method: 'POST', headers: { 'content-type': 'application/json' }, agent: false }, (response) => {
          response.pause();
          const reader = setInterval(() => {
            // 100 bytes every 100 ms: 1 KB/s.
            const chunk = response.read(100) as Buffer | null;
            if (chunk !== null) received += chunk.length;
            largestHeld = Math.max(largestHeld, proxied?.writableLength ?? 0);
          }, 100);
          void sleep(3_000).then(() => {
            clearInterval(reader);
            outgoing.destroy();
            resolve();
          });
        });
        outgoing.once('error', reject);
        outgoing.end(JSON.stringify(streamed));
      });
    } finally {
      proxy.app.server.off('request', capture);
    }
    console.info(`slow reader: read ${received} bytes in 3 s; upstream wrote ${(stream.written() / 2 ** 20).toFixed(1)} MiB; compactor held at most ${largestHeld} bytes for the client`);
    expect(received).toBeGreaterThan(0);
    expect(largestHeld).toBeLessThanOrEqual(2 ** 20);
    // Socket buffers on the way hold a few MiB at most: the upstream was paused long before the end.
    expect(stream.written()).toBeLessThan((total * event.length) / 2);
    await upstream.waitFor(() => upstream.requestsTo(CHAT)[0]?.abortedAt != null, { what: 'the upstream to see the close' });
  });
});

describe('a summarizer down for long', () => {
  it('forgets the conversations whose summary failed once their minute of backoff is over (no growth without end)', async () => {
    const clock = manualClock();
    const { compactor, summarizer } = compactorWith({}, { now: clock.now });
    summarizer.failures = Number.MAX_SAFE_INTEGER;
    const prepare = (agent: number) => {
      const messages = conversation({ turns: 20, system: `agent ${agent}` });
      return compactor.compact({ request: chatRequestView({ model: 'm', messages }), tenant: '', signal: new AbortController().signal });
    };
    for (let agent = 0; agent < 50; agent++) expect((await prepare(agent)).report).toMatch(/^truncated /);
    expect(compactor.backoff.size).toBe(50);
    clock.advance(61_000);
    await prepare(1_000);
    expect(compactor.backoff.size).toBe(1);
  });
});

describe('a summarizer that fails or times out', () => {
  let summaryUpstream: FakeUpstream;
  let llama: SimulatedLlama;
  let compacting: Proxy;
  beforeAll(async () => {
    summaryUpstream = await FakeUpstream.start();
    llama = new SimulatedLlama(summaryUpstream, { window: 8192 });
    compacting = await startProxy(summaryUpstream, { listen: true, config: { compaction: { enabled: true, summary: { timeout_ms: 300 } } } });
  });
  afterAll(async () => {
    await compacting.close();
    await summaryUpstream.close();
  });

  for (const fault of ['times out', 'fails'] as const) {
    it(`${fault}: the request is answered with a truncation, and nothing is left running`, async () => {
      llama.summaryDelayMs = fault === 'times out' ? 5_000 : 0;
      // Every try fails: suffix mode, then prepend mode.
      llama.summaryFailures = fault === 'fails' ? 100 : 0;
      // Another conversation each time, so the failure backoff of the first does not answer the second.
      const messages = conversation({ turns: 22, system: `agent ${fault}` });
      const answer = await postJson(compacting.url + CHAT, { model: 'sim', messages });
      expect(answer.status).toBe(200);
      expect(answer.headers['x-compactor']).toMatch(/^truncated /);
      const summaries = summaryUpstream.requestsTo(CHAT).filter((received) => JSON.stringify(received.json).includes('handoff notes'));
      expect(summaries.length).toBeGreaterThan(0);
      if (fault === 'times out') await summaryUpstream.waitFor(() => summaries.every((received) => received.abortedAt !== null), { what: 'the summary calls to be closed' });
      await waitUntil(() => compacting.app.proxy.engine!.runningSummaries === 0, 'no summary running');
      await waitUntil(() => compacting.app.proxy.upstream.activeRequests === 0, 'no upstream request in flight');
    });
  }
});
