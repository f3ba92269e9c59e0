import { describe, expect, it } from 'vitest';
import { RATIOS_REMEMBERED } from '../../src/compaction/sizes/token-ratio.js';
import { type FakeUpstream } from '../support/fake-upstream.js';
import { postJson, send } from '../support/http-client.js';
import { type Proxy, sharedForSuite } from '../support/proxy.js';

/**
 * Issue 14, "Unbounded state from request text": a chat request's `model` is
 * whatever the client writes, and compactor keeps state per model (context
 * windows, token ratios) and asked the upstream about each new one. 60
 * requests with 16 MB names took RSS from 88 MB to 2.1 GB; 30,000 with 4 KB
 * names made /readyz a 123 MB body.
 */

const CHAT = '/v1/chat/completions';
const messages = [{ role: 'user', content: 'Say hi.' }];

let upstream: FakeUpstream;
let proxy: Proxy;

sharedForSuite({ listen: true, config: { compaction: { enabled: true } } }, (started) => {
  ({ upstream, proxy } = started);
});

describe('model names', () => {
  it('a model name over 256 characters: 400 naming `model`, nothing sent upstream; 256 is accepted', async () => {
    upstream.reset();
    const tooLong = await postJson(proxy.url + CHAT, { model: 'm'.repeat(257), messages });
    expect(tooLong.status).toBe(400);
    const error = (JSON.parse(tooLong.body.toString()) as { error: Record<string, unknown> }).error;
    expect(error).toMatchObject({ type: 'invalid_request_error', param: 'model' });
    expect(error['message']).toMatch(/^model: .*256 characters/);
    expect(upstream.requests).toHaveLength(0);
    expect((await postJson(proxy.url + CHAT, { model: 'm'.repeat(256), messages })).status).toBe(200);
  });

  it('after 600 distinct model names, per-model state stays bounded, /readyz stays small, and the upstream was asked once', async () => {
    upstream.reset();
    for (let index = 0; index < 600; index++) {
      const answer = await postJson(proxy.url + CHAT, { model: `invented-${index}-${'x'.repeat(200)}`, messages });
      expect(answer.status).toBe(200);
    }
    const engine = proxy.app.proxy.engine!;
    expect(engine.windows.size).toBeLessThanOrEqual(256);
    expect(engine.ratios.size).toBeLessThanOrEqual(RATIOS_REMEMBERED);
    const ready = await send(`${proxy.url}/readyz`);
    expect(ready.status).toBe(200);
    // 256 names of ~215 characters and their windows: ~60 KB; unbounded, 600 of them made ~135 KB.
    expect(ready.body.length).toBeLessThan(64 * 1024);
    // Once a minute at most; a slow machine may straddle one minute's end.
    expect(upstream.requestsTo('/props').length).toBeLessThanOrEqual(2);
    expect(upstream.requestsTo(CHAT)).toHaveLength(600);
  });
});
