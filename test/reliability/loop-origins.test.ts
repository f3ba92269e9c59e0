import { describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { VIA_NAME } from '../../src/upstream/via.js';
import { FakeUpstream } from '../support/fake-upstream.js';
import { closedAfterEachTest, LogCapture, startProxy, testConfig } from '../support/proxy.js';
import { freePort } from '../support/free-port.js';

/**
 * Issue 21 item 8: a client-sent `Via: 1.1 compactor-…` got its 508 before
 * the key check, and used up the once-per-process loop warning, so a real
 * loop later was never logged. A `Via` is a loop only when it carries this
 * process's own mark, which is random per process and never shown to a
 * client: that one is answered 508 (and warned, once per origin) whatever
 * the key, so a self-loop whose `upstream.api_key` is not among `auth.keys`
 * is still a loop, not a 401. Any other `Via` goes through the key check.
 */

const opened = closedAfterEachTest();
const loopWarnings = (lines: Record<string, unknown>[]) => lines.filter((line) => line['level'] === 40 && String(line['msg']).includes('points at compactor itself'));


describe('issue 21 item 8: loops after keys, warned per origin', () => {
  it('a Via naming some other compactor (what a client can write) without a valid key gets 401, not 508, and logs nothing', async () => {
    const upstream = opened(await FakeUpstream.start());
    const proxy = opened(await startProxy(upstream, { config: { auth: { keys: ['sk-good'] } } }));
    const other = VIA_NAME === 'compactor-00000000' ? 'compactor-11111111' : 'compactor-00000000';
    const forged = await proxy.app.inject({ method: 'GET', url: '/v1/models', headers: { via: `1.1 ${other}` } });
    expect(forged.statusCode).toBe(401);
    expect(loopWarnings(proxy.logs.entries())).toHaveLength(0);
  });

  it('the process mark is long enough that a client cannot guess it', () => {
    expect(VIA_NAME).toMatch(/^compactor-[0-9a-f]{32}$/);
  });

  it('a real self-loop gets 508 and its warning even when upstream.api_key is not among auth.keys', async () => {
    const port = await freePort();
    const logs = new LogCapture();
    const config = testConfig(`http://127.0.0.1:${port}`, { listen: { port }, auth: { keys: ['sk-good'] }, upstream: { api_key: 'sk-upstream' } });
    const app = opened(buildApp(config, { logStream: logs }));
    await app.listen({ host: '127.0.0.1', port });
    const answer = await fetch(`http://127.0.0.1:${port}/v1/models`, { headers: { authorization: 'Bearer sk-good' } });
    expect(answer.status).toBe(508);
    expect(await answer.json()).toMatchObject({ error: { code: 'loop_detected' } });
    expect(loopWarnings(logs.entries())).toHaveLength(1);
  });

  it('a loop is warned once per origin: one origin looping again and again does not silence another', async () => {
    const upstream = opened(await FakeUpstream.start());
    const proxy = opened(await startProxy(upstream, { config: { auth: { keys: ['sk-good'] } } }));
    for (let attempt = 0; attempt < 3; attempt++) {
      const looped = await proxy.app.inject({ method: 'GET', url: '/v1/models', remoteAddress: '10.9.8.7', headers: { via: `1.1 ${VIA_NAME}` } });
      expect(looped.statusCode).toBe(508);
    }
    expect(loopWarnings(proxy.logs.entries())).toHaveLength(1);
    // Another loop: compactor's own request back through a proxy in between.
    const other = await proxy.app.inject({ method: 'GET', url: '/v1/models', remoteAddress: '127.0.0.1', headers: { via: `1.1 ${VIA_NAME}, 1.1 nginx` } });
    expect(other.statusCode).toBe(508);
    expect(loopWarnings(proxy.logs.entries())).toHaveLength(2);
  });
});
