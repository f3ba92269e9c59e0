import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { capConnections, connectionBoundOf, openFileLimit } from '../../src/http/edge/connection-cap.js';
import { FakeUpstream } from '../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';
import { connectFrom, hasWholeResponse, lastStatus, type HeldConnection } from './loopback-clients.js';

/**
 * `limits.max_connections` (issue 21 item 4; issue 34 item 1): connections
 * are counted per client address, and past the bound the client holding the
 * most pays: its newest idle or silent connection is closed, or the newcomer
 * is answered a 503 when it is that client's, or when nothing of that client
 * may be closed. Another client's connection is never taken, a request whose
 * body has arrived is never cut, nor an upload that makes progress; the
 * warning counts every closing. Distinct clients are distinct loopback
 * addresses (loopback-clients.ts). Nothing is timed: each step waits for the
 * event it needs (the server's answer, a connection's close, a request's bytes).
 */

const opened = closedAfterEachTest();

interface Warning {
  readonly fields: Record<string, unknown>;
  readonly message: string;
}

/** A plain HTTP server under the cap, answering 200 to whatever arrives whole; its warnings kept, its report run when the test says. */
async function cappedServer(max: number, onRequest: (request: IncomingMessage) => void = () => undefined) {
  const warnings: Warning[] = [];
  const log = { warn: (fields: Record<string, unknown>, message: string) => warnings.push({ fields, message }) } as never;
  const reports: Array<() => void> = [];
  const server: Server = createServer((request, response) => {
    onRequest(request);
    request.resume();
    request.once('end', () => response.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' }).end('ok'));
  });
  const cap = capConnections(server, { max, why: `limits.max_connections ${max}` }, log, { schedule: (report) => reports.push(report) });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const clients: HeldConnection[] = [];
  opened({
    close: async () => {
      for (const client of clients) client.socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
  const from = async (address: string): Promise<HeldConnection> => {
    const client = await connectFrom(url, address);
    clients.push(client);
    return client;
  };
  /** A request and its answer on a connection of its own from `address`: the server has seen that connection once it answers. */
  const ask = async (address: string): Promise<number> => {
    const client = await from(address);
    client.socket.write('GET / HTTP/1.1\r\nHost: t\r\n\r\n');
    return lastStatus(await client.until((text) => hasWholeResponse(text)));
  };
  return { url, cap, warnings, reports, from, ask };
}

const GET = 'GET / HTTP/1.1\r\nHost: t\r\n\r\n';

describe('limits.max_connections', () => {
  it('auto is half of the open-file limit less 64, read from /proc/self/limits', () => {
    expect(connectionBoundOf('auto', 1024)).toEqual({ max: 480, why: 'limits.max_connections 480 (auto: open-file limit 1024)' });
    expect(connectionBoundOf('auto', 80).max).toBe(16);
    expect(connectionBoundOf('auto', null).max).toBe(4096);
    expect(connectionBoundOf(10)).toEqual({ max: 10, why: 'limits.max_connections 10' });
    expect(openFileLimit(() => 'Limit                     Soft Limit           Hard Limit           Units\nMax open files            256                  4096                 files\n')).toBe(256);
    expect(openFileLimit(() => { throw new Error('ENOENT'); })).toBeNull();
  });

  it('issue 34 item 1: past the bound, the newest idle connection of the client holding the most is closed, never another client\'s', async () => {
    const server = await cappedServer(3);
    // Another client's idle keep-alive, served once.
    const keptAlive = await server.from('127.0.0.2');
    keptAlive.socket.write(GET);
    await keptAlive.until((text) => hasWholeResponse(text));
    const heavy = [await server.from('127.0.0.3'), await server.from('127.0.0.3')];
    // A newcomer from a third client: 127.0.0.3 holds the most, its newest goes.
    expect(await server.ask('127.0.0.4')).toBe(200);
    await heavy[1]!.closing;
    expect([keptAlive.closed(), heavy[0]!.closed()]).toEqual([false, false]);
    // The kept-alive connection still serves.
    const before = keptAlive.text().length;
    keptAlive.socket.write(GET);
    expect(lastStatus(await keptAlive.until((text) => hasWholeResponse(text, before)))).toBe(200);
  });

  it('issue 34 item 1: a newcomer of the client holding the most is answered a 503 in OpenAI\'s shape, and the warning counts every closing', async () => {
    const server = await cappedServer(3);
    const other = await server.from('127.0.0.2');
    const mine = [await server.from('127.0.0.3'), await server.from('127.0.0.3')];
    const refused: HeldConnection[] = [];
    for (let index = 0; index < 4; index++) refused.push(await server.from('127.0.0.3'));
    const answers = await Promise.all(refused.map(async (client) => (await client.closing, client.text())));
    for (const answer of answers) {
      expect(lastStatus(answer)).toBe(503);
      expect(answer.toLowerCase()).toContain('retry-after: 1');
      expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({ error: { code: 'too_many_connections', type: 'server_error', message: expect.stringContaining('limits.max_connections') } });
    }
    expect([other.closed(), ...mine.map((client) => client.closed())]).toEqual([false, false, false]);
    // One report for the burst, said when it is due (the test runs it), counting all four.
    expect(server.reports).toHaveLength(1);
    server.reports[0]!();
    expect(server.warnings).toHaveLength(1);
    expect(server.warnings[0]!.fields).toMatchObject({ closed: 0, refused: 4, max: 3 });
    expect(server.warnings[0]!.message).toContain('refused 4');
  });

  it('issue 34 item 1: an upload that is making progress is never cut, even of the client holding the most', async () => {
    const arrived = { bytes: 0, wake: () => undefined as void };
    const server = await cappedServer(3, (request) => {
      request.on('data', (chunk: Buffer) => {
        arrived.bytes += chunk.length;
        arrived.wake();
      });
    });
    const size = 4 * 1024 * 1024;
    /** An upload from 127.0.0.3, half of it read by the server: far faster than a silent connection's rate. */
    const upload = async (): Promise<HeldConnection> => {
      const client = await server.from('127.0.0.3');
      const target = arrived.bytes + size / 2;
      client.socket.write(`POST / HTTP/1.1\r\nHost: t\r\nContent-Length: ${size}\r\n\r\n`);
      client.socket.write(Buffer.alloc(size / 2, 'a'));
      while (arrived.bytes < target) await new Promise<void>((resolve) => (arrived.wake = resolve));
      return client;
    };
    // The oldest and the newest of the client holding the most are uploads; the one between is silent.
    const first = await upload();
    const silent = await server.from('127.0.0.3');
    const newest = await upload();
    expect(await server.ask('127.0.0.4')).toBe(200);
    await silent.closing;
    expect([first.closed(), newest.closed()]).toEqual([false, false]);
    for (const client of [first, newest]) {
      client.socket.write(Buffer.alloc(size / 2, 'a'));
      expect(lastStatus(await client.until((text) => hasWholeResponse(text)))).toBe(200);
    }
  });

  it('a request being answered is never cut: with every connection answering, the newcomer is answered a 503', async () => {
    const upstream = opened(await FakeUpstream.start());
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    upstream.route('GET', '/v1/models', async ({ response }) => {
      await held;
      response.writeHead(200, { 'content-type': 'application/json' }).end('{"object":"list","data":[]}');
    });
    const proxy = opened(await startProxy(upstream, { listen: true, config: { limits: { max_connections: 2 } } }));
    const answering = [fetch(`${proxy.url}/v1/models`), fetch(`${proxy.url}/v1/models`)];
    await upstream.waitFor(() => upstream.requestsTo('/v1/models').length === 2, { what: 'both requests upstream' });
    const refused = await connectFrom(proxy.url, '127.0.0.2');
    await refused.closing;
    expect(lastStatus(refused.text())).toBe(503);
    release();
    const statuses = await Promise.all(answering.map(async (pending) => (await pending).status));
    expect(statuses).toEqual([200, 200]);
  });
});
