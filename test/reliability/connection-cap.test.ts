import { connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { connectionBoundOf, openFileLimit } from '../../src/http/connection-cap.js';
import { FakeUpstream } from '../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';

/**
 * `limits.max_connections` (issue 21 item 4): past it, the connection served
 * least recently that is not being answered is closed for the new one; a
 * request whose body has arrived is never cut, and when every connection is
 * being answered the new one is refused.
 */

const opened = closedAfterEachTest();

async function silent(url: string): Promise<{ socket: Socket; closed: () => boolean }> {
  const { hostname, port } = new URL(url);
  const socket = await new Promise<Socket>((resolve, reject) => {
    const made = connect({ host: hostname, port: Number(port) }, () => resolve(made));
    made.once('error', reject);
  });
  socket.on('error', () => undefined);
  let closed = false;
  socket.once('close', () => (closed = true));
  opened({ close: async () => void socket.destroy() });
  return { socket, closed: () => closed };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 100));

describe('limits.max_connections', () => {
  it('auto is half of the open-file limit less 64, read from /proc/self/limits', () => {
    expect(connectionBoundOf('auto', 1024)).toEqual({ max: 480, why: 'limits.max_connections 480 (auto: open-file limit 1024)' });
    expect(connectionBoundOf('auto', 80).max).toBe(16);
    expect(connectionBoundOf('auto', null).max).toBe(4096);
    expect(connectionBoundOf(10)).toEqual({ max: 10, why: 'limits.max_connections 10' });
    expect(openFileLimit(() => 'Limit                     Soft Limit           Hard Limit           Units\nMax open files            256                  4096                 files\n')).toBe(256);
    expect(openFileLimit(() => { throw new Error('ENOENT'); })).toBeNull();
  });

  it('past the bound, the oldest connection that is not being answered is closed for the new one, and the log names the limit', async () => {
    const upstream = opened(await FakeUpstream.start());
    const proxy = opened(await startProxy(upstream, { listen: true, config: { limits: { max_connections: 3 } } }));
    const idle = [await silent(proxy.url), await silent(proxy.url), await silent(proxy.url)];
    await settle();
    expect(idle.map((client) => client.closed())).toEqual([false, false, false]);
    const answer = await fetch(`${proxy.url}/v1/models`);
    expect(answer.status).toBe(200);
    await answer.arrayBuffer();
    await settle();
    expect(idle.map((client) => client.closed())).toEqual([true, false, false]);
    const warned = proxy.logs.entries().filter((line) => String(line['msg']).includes('over limits.max_connections (3)'));
    expect(warned).toHaveLength(1);
  });

  it('a request being answered is never cut: with every connection answering, the new one is refused', async () => {
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
    const refused = await silent(proxy.url);
    await settle();
    expect(refused.closed()).toBe(true);
    release();
    const statuses = await Promise.all(answering.map(async (pending) => (await pending).status));
    expect(statuses).toEqual([200, 200]);
  });
});
