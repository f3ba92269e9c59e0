import { describe, expect, it } from 'vitest';
import { VIA_NAME } from '../../src/upstream/via.js';
import { FakeUpstream } from '../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';

/**
 * Issue 21 item 8: a client-sent `Via: 1.1 compactor-…` got its 508 before
 * the key check, and used up the once-per-process loop warning, so a real
 * loop later was never logged. Keys are checked first; the warning is given
 * once per distinct origin of a loop.
 */

const opened = closedAfterEachTest();
const loopWarnings = (lines: Record<string, unknown>[]) => lines.filter((line) => line['level'] === 40 && String(line['msg']).includes('points at compactor itself'));

describe('issue 21 item 8: loops after keys, warned per origin', () => {
  it('a forged Via without a valid key gets 401, not 508, and logs nothing', async () => {
    const upstream = opened(await FakeUpstream.start());
    const proxy = opened(await startProxy(upstream, { config: { auth: { keys: ['sk-good'] } } }));
    const forged = await proxy.app.inject({ method: 'GET', url: '/v1/models', headers: { via: `1.1 ${VIA_NAME}` } });
    expect(forged.statusCode).toBe(401);
    expect(loopWarnings(proxy.logs.entries())).toHaveLength(0);
  });

  it('a client that forges a loop does not silence the warning of a real loop from another origin', async () => {
    const upstream = opened(await FakeUpstream.start());
    const proxy = opened(await startProxy(upstream, { config: { auth: { keys: ['sk-good'] } } }));
    const authorization = 'Bearer sk-good';
    for (let attempt = 0; attempt < 3; attempt++) {
      const forged = await proxy.app.inject({ method: 'GET', url: '/v1/models', remoteAddress: '10.9.8.7', headers: { authorization, via: `1.1 ${VIA_NAME}` } });
      expect(forged.statusCode).toBe(508);
    }
    expect(loopWarnings(proxy.logs.entries())).toHaveLength(1);
    // The real loop: compactor's own request back through a proxy in between.
    const real = await proxy.app.inject({ method: 'GET', url: '/v1/models', remoteAddress: '127.0.0.1', headers: { authorization, via: `1.1 ${VIA_NAME}, 1.1 nginx` } });
    expect(real.statusCode).toBe(508);
    expect(loopWarnings(proxy.logs.entries())).toHaveLength(2);
  });
});
