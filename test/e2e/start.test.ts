import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeUpstream, replies } from '../support/fake-upstream.js';
import { startMain } from '../support/main-process.js';
import { freePort } from '../support/free-port.js';

/**
 * What compactor says at start (issue 22, items 6 and 7): one line with its
 * version, mode, store and upstream; `upstream ready` the moment a model
 * finished loading; a port in use, an upstream that is compactor itself, an
 * unreachable Redis said in words that fix them.
 */

let upstream: FakeUpstream;

beforeAll(async () => {
  upstream = await FakeUpstream.start();
});
afterAll(async () => {
  await upstream.close();
});


async function outputContains(main: ReturnType<typeof startMain>, text: string | RegExp, timeoutMs = 8_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const found = (): boolean => (typeof text === 'string' ? main.output().includes(text) : text.test(main.output()));
  while (!found() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  expect(main.output()).toMatch(typeof text === 'string' ? new RegExp(text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')) : text);
}

const ENV = { COMPACTOR_CONFIG: '' };

describe('compactor at start', () => {
  it('logs one line with the version, the mode, the store and the upstream', async () => {
    const main = startMain(['--port', '0', '--observe'], { ...ENV, COMPACTOR_UPSTREAM_URL: upstream.url });
    await main.url;
    await outputContains(main, /"msg":"compactor 0\.1\.0 listening on http:\/\/127\.0\.0\.1:\d+: mode observe, store memory, upstream http:\/\/127\.0\.0\.1:\d+"/);
    main.child.kill('SIGTERM');
    expect(await main.exit).toBe(0);
  });

  it('says `upstream ready` when an upstream that was loading its model becomes ready', async () => {
    const loading = await FakeUpstream.start();
    try {
      let ready = false;
      loading.route('GET', '/health', (exchange) => (ready ? replies.json(200, { status: 'ok' }) : replies.json(503, { error: { message: 'Loading model', code: 503 } }))(exchange));
      const main = startMain(['--port', '0'], { ...ENV, COMPACTOR_UPSTREAM_URL: loading.url });
      await main.url;
      await outputContains(main, 'upstream not ready');
      ready = true;
      await outputContains(main, /"msg":"upstream ready: llama-server, \d+ model\(s\)"/);
      main.child.kill('SIGTERM');
      expect(await main.exit).toBe(0);
    } finally {
      await loading.close();
    }
  });

  it('a port in use: which port, how to change it, exit 2, no stack trace', async () => {
    const taken: Server = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const port = (taken.address() as { port: number }).port;
      const main = startMain(['--port', String(port)], { ...ENV, COMPACTOR_UPSTREAM_URL: upstream.url });
      // It never listens: the promise of its address is expected to reject.
      main.url.catch(() => undefined);
      expect(await main.exit).toBe(2);
      expect(main.output()).toContain(`port ${port} on 127.0.0.1 is already in use`);
      expect(main.output()).toContain('--port');
      expect(main.output()).toContain('COMPACTOR_PORT');
      expect(main.output()).not.toMatch(/"stack"|\n\s+at /);
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });

  it('an upstream that is compactor itself is refused at start', async () => {
    const port = await freePort();
    const main = startMain(['--port', String(port), '--upstream', `http://127.0.0.1:${port}`], ENV);
    await main.url;
    expect(await main.exit).toBe(2);
    expect(main.output()).toContain('upstream.url points at compactor itself');
  });

  it('an unreachable Redis is named with its host and the error', async () => {
    const port = await freePort();
    const main = startMain(['--port', '0'], { ...ENV, COMPACTOR_UPSTREAM_URL: upstream.url, COMPACTOR_CACHE_STORE: 'redis', COMPACTOR_REDIS_URL: `redis://127.0.0.1:${port}` });
    await main.url;
    await outputContains(main, new RegExp(`store redis 127\\.0\\.0\\.1:${port} \\(not answering: [^)]*ECONNREFUSED`));
    main.child.kill('SIGTERM');
    expect(await main.exit).toBe(0);
  });
});
