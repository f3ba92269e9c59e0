import type { ChildProcess } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeUpstream } from '../support/fake-upstream.js';
import { startMain } from '../support/main-process.js';
import { connectFrom, hasWholeResponse, lastStatus, type HeldConnection } from './loopback-clients.js';

/**
 * Issue 21 item 4, end to end: 1,500 connections each announcing a 40 MiB
 * body and trickling a byte every 5 s were all held (one descriptor each)
 * until, under `ulimit -n 1024`, a normal request's upstream connect found no
 * descriptor and got a 502. The same at a smaller scale: compactor as a
 * process under `ulimit -n 256`, more slow connections than that, then a
 * normal request must be answered by the upstream.
 */

const OPEN_FILES = 256;
const HOSTILE = 300;
const OVERSIZED = 40 * 1024 * 1024;
/** The hostile client's address: the bound counts per address, and the normal requests come from 127.0.0.1 (loopback-clients.ts). */
const HOSTILE_ADDRESS = '127.0.0.2';

let held: Socket[] = [];
let upstream: FakeUpstream | undefined;
afterEach(async () => {
  for (const socket of held) socket.destroy();
  held = [];
  await upstream?.close();
});

/** `count` connections that each send `opening`, then one byte of `trickle` every `everyMs`, and never finish. */
async function slowClients(url: string, count: number, opening: string, everyMs: number, localAddress = HOSTILE_ADDRESS): Promise<Socket[]> {
  const { hostname, port } = new URL(url);
  const open = (): Promise<Socket> =>
    new Promise((resolve) => {
      const socket = connect({ host: hostname, port: Number(port), localAddress }, () => resolve(socket));
      socket.on('error', () => resolve(socket));
      socket.on('data', () => undefined);
      socket.once('connect', () => socket.write(opening));
      const timer = setInterval(() => (socket.destroyed ? clearInterval(timer) : socket.write('x')), everyMs);
      timer.unref();
      socket.once('close', () => clearInterval(timer));
    });
  const sockets: Socket[] = [];
  for (let batch = 0; batch < count; batch += 50) sockets.push(...(await Promise.all(Array.from({ length: Math.min(50, count - batch) }, open))));
  return sockets;
}

/** Resolves once the child's output holds `text` (waited for on its output, not for a time). */
function outputContains(child: ChildProcess, output: () => string, text: string): Promise<void> {
  return new Promise((resolve) => {
    const check = (): void => {
      if (!output().includes(text)) return;
      child.stdout!.off('data', check);
      resolve();
    };
    child.stdout!.on('data', check);
    check();
  });
}

/** A normal request's status, or what went wrong. */
async function normalRequest(url: string, path: string, init: RequestInit = {}): Promise<number | string> {
  try {
    const answer = await fetch(`${url}${path}`, { ...init, signal: AbortSignal.timeout(10_000) });
    await answer.arrayBuffer();
    return answer.status;
  } catch (error) {
    return String((error as { cause?: unknown }).cause ?? error);
  }
}

const CHAT = { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }) };

// The oversized ones are answered 413 at once and closed (past limits.max_draining, or when their drain is too slow);
// the others would be held for Node's headersTimeout (60 s) or compactor's requestTimeout (300 s): limits.max_connections closes them.
const cases: Array<[string, string]> = [
  ['each announcing a 40 MiB body (over limits.body_bytes) and trickling it', `POST /v1/chat/completions HTTP/1.1\r\nHost: compactor\r\nContent-Type: application/json\r\nContent-Length: ${OVERSIZED}\r\n\r\nx`],
  ['each sending its headers a byte at a time, never ending them', 'POST /v1/chat/completions HTTP/1.1\r\nHost: compactor\r\nX-Slow: '],
  ['each announcing a small body and trickling it, never ending it', 'POST /v1/chat/completions HTTP/1.1\r\nHost: compactor\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{'],
  ['each opened and silent', ''],
];

describe(`issue 21 item 4: ${HOSTILE} slow connections under ulimit -n ${OPEN_FILES}`, () => {
  it.each(cases)('%s: a normal request is still answered by the upstream (200, not a 502 or a refused connection)', async (_name, opening) => {
    upstream = await FakeUpstream.start();
    const main = startMain(['--host', '127.0.0.1', '--port', '0'], { COMPACTOR_UPSTREAM_URL: upstream.url, COMPACTOR_CONFIG: '', COMPACTOR_COMPACTION: 'false' }, { openFiles: OPEN_FILES });
    const url = await main.url;
    try {
      held = await slowClients(url, HOSTILE, opening, 5_000);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      const before = upstream.requestsTo('/v1/models').length;
      expect(await normalRequest(url, '/v1/models')).toBe(200);
      expect(upstream.requestsTo('/v1/models').length).toBe(before + 1);
      expect(await normalRequest(url, '/v1/chat/completions', CHAT)).toBe(200);
      // The bound chosen from the descriptor limit is in the start line, and its closings are said naming it.
      expect(main.output()).toContain('limits.max_connections 96 (auto: open-file limit 256)');
      // Said within a second of the first closing, with the burst's count.
      if (!opening.includes(`Content-Length: ${OVERSIZED}`)) await outputContains(main.child, main.output, 'connections over limits.max_connections (96)');
    } finally {
      main.child.kill('SIGKILL');
      await main.exit;
    }
  }, 60_000);
});

/**
 * Issue 34 item 1, the issue's shape: under `ulimit -n 256` (bound 96), 96
 * connections from one address that send nothing reset 5 of 5 other
 * clients' uploads in progress and 5 of 5 idle keep-alives, and the warning
 * said "closed 1" while 10 were closed. Each client at its own loopback
 * address; the attacker's connections past the bound must be the ones
 * refused, and the warning must count them.
 */
describe('issue 34 item 1: 96 silent connections from one address under ulimit -n 256', () => {
  it('reset no other client\'s upload or idle keep-alive, and the warnings count every closing', async () => {
    upstream = await FakeUpstream.start();
    const main = startMain(['--host', '127.0.0.1', '--port', '0'], { COMPACTOR_UPSTREAM_URL: upstream.url, COMPACTOR_CONFIG: '', COMPACTOR_COMPACTION: 'false' }, { openFiles: OPEN_FILES });
    const url = await main.url;
    const clients: HeldConnection[] = [];
    try {
      const body = Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'u'.repeat(200_000) }] }));
      const half = body.length >> 1;
      const uploads = await Promise.all([10, 11, 12, 13, 14].map((last) => connectFrom(url, `127.0.0.${last}`)));
      const keptAlive = await Promise.all([20, 21, 22, 23, 24].map((last) => connectFrom(url, `127.0.0.${last}`)));
      clients.push(...uploads, ...keptAlive);
      for (const client of keptAlive) client.socket.write('GET /v1/models HTTP/1.1\r\nHost: compactor\r\n\r\n');
      for (const client of keptAlive) expect(lastStatus(await client.until((text) => hasWholeResponse(text)))).toBe(200);
      for (const client of uploads) {
        client.socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: compactor\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
        client.socket.write(body.subarray(0, half));
      }
      const attack = await Promise.all(Array.from({ length: 96 }, () => connectFrom(url, HOSTILE_ADDRESS)));
      clients.push(...attack);
      // 10 + 96 connections against a bound of 96: ten of the attacker's are refused, each with a 503.
      let refused = 0;
      await new Promise<void>((resolve) => {
        for (const client of attack) void client.closing.then(() => ++refused === 10 && resolve());
      });
      expect(attack.filter((client) => client.closed()).map((client) => lastStatus(client.text()))).toEqual(Array(10).fill(503));
      for (const client of uploads) client.socket.write(body.subarray(half));
      for (const client of uploads) expect(lastStatus(await client.until((text) => hasWholeResponse(text)))).toBe(200);
      for (const client of keptAlive) {
        const before = client.text().length;
        client.socket.write('GET /v1/models HTTP/1.1\r\nHost: compactor\r\n\r\n');
        expect(lastStatus(await client.until((text) => hasWholeResponse(text, before)))).toBe(200);
      }
      expect([...uploads, ...keptAlive].filter((client) => client.closed())).toHaveLength(0);
      // Said within a second of the burst (at most once a minute after), counting all ten.
      const warned = (): Array<{ closed: number; refused: number }> =>
        main.output().split('\n').filter((line) => line.includes('connections over limits.max_connections (96)')).map((line) => JSON.parse(line) as { closed: number; refused: number });
      const counted = (): number => warned().reduce((sum, line) => sum + line.closed + line.refused, 0);
      await outputContains(main.child, main.output, 'connections over limits.max_connections (96)');
      while (counted() < 10) await new Promise((resolve) => main.child.stdout!.once('data', resolve));
      expect(counted()).toBe(10);
    } finally {
      for (const client of clients) client.socket.destroy();
      main.child.kill('SIGKILL');
      await main.exit;
    }
  }, 90_000);
});
