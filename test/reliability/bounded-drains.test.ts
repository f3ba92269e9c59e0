import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeUpstream } from '../support/fake-upstream.js';
import { type Proxy, startProxy } from '../support/proxy.js';

/**
 * Issue 21 item 4: 1,500 connections each announcing a 40 MiB body and
 * trickling a byte every 5 s were all held (one descriptor each) for up to
 * 60 s, until a normal request's upstream connect found no descriptor. The
 * drains after a 413 are bounded in number (`limits.max_draining`: past it,
 * 413 and close at once) and in rate (`limits.drain_min_bytes_per_s`).
 */

const CHAT = '/v1/chat/completions';

let upstream: FakeUpstream | undefined;
let proxy: Proxy | undefined;
afterEach(async () => {
  await proxy?.close();
  await upstream?.close();
});

interface Trickler {
  readonly socket: Socket;
  /** The answer's bytes so far. */
  received(): string;
  readonly closed: Promise<void>;
  isClosed(): boolean;
}

/** A client that announces a body far over the limit, sends `first` bytes of it, then one byte every `everyMs`. */
async function trickler(url: string, first: number, everyMs: number): Promise<Trickler> {
  const { hostname, port } = new URL(url);
  const socket = await new Promise<Socket>((resolve, reject) => {
    const opened = connect({ host: hostname, port: Number(port) }, () => resolve(opened));
    opened.once('error', reject);
  });
  let received = '';
  let closed = false;
  socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
  socket.on('error', () => undefined);
  const whenClosed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  void whenClosed.then(() => (closed = true));
  socket.write(`POST ${CHAT} HTTP/1.1\r\nHost: compactor\r\nContent-Type: application/json\r\nContent-Length: ${40 * 1024 * 1024}\r\n\r\n`);
  socket.write(Buffer.alloc(first, 'x'));
  const timer = setInterval(() => (closed ? clearInterval(timer) : socket.write('x')), everyMs);
  void whenClosed.then(() => clearInterval(timer));
  return { socket, received: () => received, closed: whenClosed, isClosed: () => closed };
}

const until = async (condition: () => boolean, ms = 5_000): Promise<void> => {
  for (const started = Date.now(); !condition() && Date.now() - started < ms; ) await new Promise((resolve) => setTimeout(resolve, 10));
};

describe('issue 21 item 4: bounded 413 drains', () => {
  it('past limits.max_draining, the next oversized body gets its 413 and is closed without draining', async () => {
    upstream = await FakeUpstream.start();
    proxy = await startProxy(upstream, { listen: true, config: { limits: { body_bytes: 1024, max_draining: 2, drain_min_bytes_per_s: 1 } } });
    const held = [await trickler(proxy.url, 10, 100), await trickler(proxy.url, 10, 100)];
    await until(() => held.every((client) => client.received().includes(' 413 ')));
    expect(held.map((client) => client.received().split('\r\n')[0])).toEqual(['HTTP/1.1 413 Payload Too Large', 'HTTP/1.1 413 Payload Too Large']);
    const third = await trickler(proxy.url, 10, 100);
    await Promise.race([third.closed, new Promise((resolve) => setTimeout(resolve, 5_000))]);
    expect(third.received().split('\r\n')[0]).toBe('HTTP/1.1 413 Payload Too Large');
    expect(third.received().toLowerCase()).toContain('connection: close');
    expect(third.isClosed()).toBe(true);
    // The first two are still being drained (their slow trickle is above the 1 byte/s floor).
    expect(held.map((client) => client.isClosed())).toEqual([false, false]);
    for (const client of [...held, third]) client.socket.destroy();
  });

  it('a drain slower than limits.drain_min_bytes_per_s is closed', async () => {
    upstream = await FakeUpstream.start();
    proxy = await startProxy(upstream, { listen: true, config: { limits: { body_bytes: 1024, drain_min_bytes_per_s: 1_000 } } });
    const slow = await trickler(proxy.url, 10, 200); // 5 bytes/s
    await until(() => slow.received().includes(' 413 '));
    expect(slow.received().split('\r\n')[0]).toBe('HTTP/1.1 413 Payload Too Large');
    await Promise.race([slow.closed, new Promise((resolve) => setTimeout(resolve, 8_000))]);
    expect(slow.isClosed(), 'a 5 bytes/s drain is closed well before the 60 s bound').toBe(true);
  });
});
