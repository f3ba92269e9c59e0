import type { ChildProcess } from 'node:child_process';
import { Agent, type IncomingMessage, request } from 'node:http';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeUpstream, chatStreamEvents, replies } from '../support/fake-upstream.js';
import { type RawExchange, postJson, send } from '../support/http-client.js';
import { type Proxy, startProxy } from '../support/proxy.js';
import { spawnOwned } from '../support/child-processes.js';
import { sseData } from '../support/sse.js';

/**
 * Issue 7, "SIGTERM with 50 live streams": new requests get 503 +
 * Connection: close, live streams finish (or, once the grace period is over,
 * get an SSE error event), and the process exits 0.
 */

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
const CHAT = '/v1/chat/completions';
const STREAMS = 50;
const streamBody = { model: 'm', messages: [{ role: 'user', content: 'Say hi.' }], stream: true };

let upstream: FakeUpstream | undefined;
let proxy: Proxy | undefined;
let child: ChildProcess | undefined;

afterEach(async () => {
  child?.kill('SIGKILL');
  await proxy?.close();
  await upstream?.close();
  child = undefined;
  proxy = undefined;
  upstream = undefined;
});

/** Opens a streamed chat request and resolves once its answer has ended or broken. */
function openStream(url: string): { response: Promise<IncomingMessage>; exchange: Promise<RawExchange> } {
  let onResponse: (response: IncomingMessage) => void = () => undefined;
  const response = new Promise<IncomingMessage>((resolve) => (onResponse = resolve));
  const exchange = postJson(url + CHAT, streamBody, { onResponse });
  return { response, exchange };
}

function expectServiceUnavailable(answer: RawExchange): void {
  expect(answer.status).toBe(503);
  expect(answer.headers['connection']).toBe('close');
  expect(answer.headers['retry-after']).toBe('5');
  expect(JSON.parse(answer.body.toString())).toMatchObject({ error: { code: 'shutting_down', type: 'server_error' } });
}

describe('SIGTERM with 50 live streams (main.ts)', () => {
  it('new requests get 503 + Connection: close, the live streams finish, exit 0', async () => {
    upstream = await FakeUpstream.start();
    // Each stream lasts about 1.5 s: well inside the grace period.
    const events = chatStreamEvents({ content: Array.from({ length: 12 }, (_, index) => `t${index} `) });
    upstream.route('POST', CHAT, replies.sse(events, { delayMs: 100 }));
    child = spawnOwned(process.execPath, ['--import', 'tsx', join(ROOT, 'src/main.ts'), '--host', '127.0.0.1', '--port', '0'], {
      cwd: ROOT,
      env: { ...process.env, COMPACTOR_UPSTREAM_URL: upstream.url, COMPACTOR_CONFIG: '' },
    });
    let output = '';
    const exited = new Promise<number | null>((resolve) => child!.once('exit', resolve));
    const url = await new Promise<string>((resolve, reject) => {
      child!.stdout!.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
        if (match?.[1] !== undefined) resolve(match[1]);
      });
      child!.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
      void exited.then(() => reject(new Error(`exited before listening:\n${output}`)));
    });

    // A keep-alive connection that has served a request already, to send one more on after SIGTERM.
    const keepAlive = new Agent({ keepAlive: true, maxSockets: 1 });
    const warm = await new Promise<number>((resolve, reject) => {
      const outgoing = request(`${url}/healthz`, { agent: keepAlive }, (response) => {
        response.resume();
        response.once('end', () => resolve(response.statusCode ?? 0));
      });
      outgoing.once('error', reject);
      outgoing.end();
    });
    expect(warm).toBe(200);

    const streams = Array.from({ length: STREAMS }, () => openStream(url));
    await Promise.all(streams.map((stream) => stream.response));
    await upstream.waitFor(() => upstream!.requestsTo(CHAT).length === STREAMS, { what: 'all streams upstream' });
    child.kill('SIGTERM');
    await sleep(200);

    // A new connection, and a request on a connection opened before: both answered 503, not refused.
    expectServiceUnavailable(await postJson(url + CHAT, streamBody));
    const onKeptConnection = await new Promise<RawExchange>((resolve, reject) => {
      const outgoing = request(url + CHAT, { method: 'POST', agent: keepAlive, headers: { 'content-type': 'application/json' } }, (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.once('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks), ending: 'ended' }));
      });
      outgoing.once('error', reject);
      outgoing.end(JSON.stringify(streamBody));
    });
    expectServiceUnavailable(onKeptConnection);
    keepAlive.destroy();

    const answers = await Promise.all(streams.map((stream) => stream.exchange));
    for (const answer of answers) {
      expect(answer.status).toBe(200);
      expect(answer.ending).toBe('ended');
      expect(sseData(answer.body.toString()).at(-1)).toBe('[DONE]');
    }
    expect(await exited).toBe(0);
    expect(upstream.requestsTo(CHAT)).toHaveLength(STREAMS);
    expect(output).toContain('shutting down');
  }, 30_000);
});

describe('the grace period running out (in process, as main.ts does it)', () => {
  it('every live stream gets an SSE error event and no [DONE], a request still waiting gets 503, the upstream sees every close', async () => {
    upstream = await FakeUpstream.start();
    proxy = await startProxy(upstream, { listen: true });
    const url = proxy.url;
    upstream.route('POST', CHAT, replies.stall({ eventsBefore: 2 }));
    upstream.route('POST', '/completion', replies.stall({ eventsBefore: 1 }));
    const streams = Array.from({ length: STREAMS }, () => openStream(url));
    await Promise.all(streams.map((stream) => stream.response));
    // One still waiting for the upstream's headers, and one pass-through stream.
    upstream.script(CHAT, replies.slowHeaders(60_000));
    const waiting = postJson(url + CHAT, { ...streamBody, stream: false });
    const passthrough = send(`${url}/completion`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"prompt":"x","stream":true}' });
    await upstream.waitFor(() => upstream!.requestsTo(CHAT).length === STREAMS + 1 && upstream!.requestsTo('/completion').length === 1, {
      what: 'every request upstream',
    });

    const app = proxy.app;
    app.proxy.startDraining();
    expectServiceUnavailable(await postJson(url + CHAT, streamBody));
    let idle = false;
    const whenIdle = app.proxy.whenIdle().then(() => (idle = true));
    await sleep(100);
    expect(idle).toBe(false);

    app.proxy.endInFlight();
    const answers = await Promise.all(streams.map((stream) => stream.exchange));
    for (const answer of answers) {
      expect(answer.status).toBe(200);
      expect(answer.ending).toBe('ended');
      const events = sseData(answer.body.toString());
      expect(events).toHaveLength(3);
      expect(JSON.parse(events.at(-1)!)).toMatchObject({ error: { code: 'shutting_down', type: 'server_error' } });
      expect(answer.body.toString()).not.toContain('[DONE]');
    }
    expectServiceUnavailable(await waiting);
    expect((await passthrough).ending).toBe('broken');
    await whenIdle;
    await upstream.waitFor(() => upstream!.requests.every((received) => received.abortedAt !== null || received.finishedAt !== null), {
      what: 'the upstream to see every close',
    });
    expect(upstream.requests.filter((received) => received.abortedAt !== null)).toHaveLength(STREAMS + 2);
    expect(app.proxy.upstream.activeRequests).toBe(0);
    const lines = proxy.logs.requests().filter((line) => line['path'] === CHAT);
    expect(lines.filter((line) => line['error'] === 'shutting_down')).toHaveLength(STREAMS + 2);
  });
});
