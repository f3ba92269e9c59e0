import { describe, it, expect } from 'vitest';
import { ContextWindows } from '../../src/compaction/sizes/context-window.js';
import { JsonUpstreamDouble } from '../support/json-upstream-double.js';
import { manualClock } from '../support/manual-clock.js';

const props = (nCtx: unknown) => ({ status: 200, body: { default_generation_settings: { n_ctx: nCtx } } });
const models = (...data: unknown[]) => ({ status: 200, body: { object: 'list', data } });

function windows(upstream: JsonUpstreamDouble, options: { configured?: (model: string) => number | 'auto' } = {}) {
  const clock = manualClock();
  const unknown: string[] = [];
  const failures: string[] = [];
  const contextWindows = new ContextWindows({
    configured: options.configured ?? (() => 'auto'),
    upstream,
    now: clock.now,
    onUnknown: (model) => unknown.push(model),
    onLookupFailed: (model, reason) => failures.push(`${model}: ${reason}`),
  });
  return { contextWindows, clock, unknown, failures };
}

describe('ContextWindows', () => {
  it('returns the configured window without asking the upstream', async () => {
    const upstream = new JsonUpstreamDouble({ 'GET /props': props(4096) });
    const { contextWindows } = windows(upstream, { configured: (model) => (model === 'big' ? 32_768 : 'auto') });
    await expect(contextWindows.get('big')).resolves.toBe(32_768);
    expect(upstream.calls).toHaveLength(0);
    await expect(contextWindows.get('other')).resolves.toBe(4096);
  });

  it("reads /props' default_generation_settings.n_ctx first", async () => {
    const upstream = new JsonUpstreamDouble({ 'GET /props': props(8192), 'GET /v1/models': models({ id: 'm', meta: { n_ctx: 99 } }) });
    const { contextWindows } = windows(upstream);
    await expect(contextWindows.get('m')).resolves.toBe(8192);
    expect(upstream.calls.map((call) => call.path)).toEqual(['/props']);
  });

  it('falls back to /v1/models meta.n_ctx of the model, then its n_ctx_train', async () => {
    const upstream = new JsonUpstreamDouble({
      'GET /v1/models': models({ id: 'other', meta: { n_ctx: 1000 } }, { id: 'm', meta: { n_ctx: 16_384, n_ctx_train: 131_072 } }),
    });
    await expect(windows(upstream).contextWindows.get('m')).resolves.toBe(16_384);
    const trainOnly = new JsonUpstreamDouble({ 'GET /v1/models': models({ id: 'm', meta: { n_ctx_train: 131_072 } }) });
    await expect(windows(trainOnly).contextWindows.get('m')).resolves.toBe(131_072);
    expect(trainOnly.calls.map((call) => call.path)).toEqual(['/props', '/v1/models']);
  });

  it('takes the first model of /v1/models when none has the id asked (llama-server serves one)', async () => {
    const upstream = new JsonUpstreamDouble({ 'GET /v1/models': models({ id: 'model.gguf', meta: { n_ctx: 4096 } }) });
    await expect(windows(upstream).contextWindows.get('gpt-4o')).resolves.toBe(4096);
  });

  it('ignores /props answers that are not a positive number, or not a 200', async () => {
    // (A 503 is not an answer but a failed lookup: see 'a failed window lookup is not cached'.)
    for (const answer of [props(0), props(-1), props('8192'), props(null), { status: 200, body: {} }, { status: 200, body: undefined }, { status: 404, body: {} }]) {
      const upstream = new JsonUpstreamDouble({ 'GET /props': answer, 'GET /v1/models': models({ id: 'm', meta: { n_ctx: 2048 } }) });
      await expect(windows(upstream).contextWindows.get('m')).resolves.toBe(2048);
    }
  });

  it('is null when nothing tells, and says so once per model', async () => {
    const upstream = new JsonUpstreamDouble({ 'GET /v1/models': models() });
    const { contextWindows, clock, unknown } = windows(upstream);
    await expect(contextWindows.get('m')).resolves.toBeNull();
    clock.advance(120_000);
    await expect(contextWindows.get('m')).resolves.toBeNull();
    expect(upstream.count('GET', '/props')).toBe(2);
    await expect(contextWindows.get('n')).resolves.toBeNull();
    expect(unknown).toEqual(['m', 'n']);
    expect(contextWindows.snapshot()).toEqual({ m: null, n: null });
  });

  it('is null, not an error, when the upstream cannot be reached, and says why (not "unknown")', async () => {
    const upstream = new JsonUpstreamDouble({ 'GET /props': new Error('connection refused'), 'GET /v1/models': new Error('connection refused') });
    const { contextWindows, unknown, failures } = windows(upstream);
    await expect(contextWindows.get('m')).resolves.toBeNull();
    expect(unknown).toEqual([]);
    expect(failures).toEqual(['m: /props: connection refused']);
  });

  describe('a failed window lookup is not cached (issue 12, item 4)', () => {
    it('asks again on the next request, which finds the window once the upstream is back', async () => {
      const upstream = new JsonUpstreamDouble({ 'GET /props': new Error('connection refused') });
      const { contextWindows, failures } = windows(upstream);
      await expect(contextWindows.get('m')).resolves.toBeNull();
      upstream.routes['GET /props'] = props(8192);
      await expect(contextWindows.get('m')).resolves.toBe(8192);
      expect(upstream.count('GET', '/props')).toBe(2);
      expect(failures).toHaveLength(1);
    });

    it("a 401 to one client's credential does not change what another client gets", async () => {
      const upstream = new JsonUpstreamDouble({
        'GET /props': (_body, headers) => (headers?.['authorization'] === 'Bearer good' ? props(16_384) : { status: 401, body: { error: { message: 'Invalid API Key' } } }),
      });
      const { contextWindows, failures } = windows(upstream);
      await expect(contextWindows.get('m', { authorization: 'Bearer wrong' })).resolves.toBeNull();
      await expect(contextWindows.get('m', { authorization: 'Bearer good' })).resolves.toBe(16_384);
      expect(failures).toEqual(['m: /props: answered 401 (it wants a key: set upstream.api_key, or send one)']);
    });

    it('a 5xx is a failure too; the warning is given once a minute for the same reason', async () => {
      const upstream = new JsonUpstreamDouble({ 'GET /props': { status: 503, body: { error: { message: 'Loading model' } } } });
      const { contextWindows, clock, failures } = windows(upstream);
      for (let request = 0; request < 5; request++) await expect(contextWindows.get('m')).resolves.toBeNull();
      expect(upstream.count('GET', '/props')).toBe(5);
      expect(failures).toEqual(['m: /props: answered 503']);
      clock.advance(60_000);
      await contextWindows.get('m');
      expect(failures).toHaveLength(2);
    });
  });

  describe("the upstream's own refusal names a smaller window (issue 12, item 3)", () => {
    it('stands over a configured or discovered window for a minute, then /props is trusted again', async () => {
      let nCtx = 32_768;
      const upstream = new JsonUpstreamDouble({ 'GET /props': () => props(nCtx) });
      const { contextWindows, clock } = windows(upstream, { configured: (model) => (model === 'fixed' ? 65_536 : 'auto') });
      await expect(contextWindows.get('m')).resolves.toBe(32_768);
      // Restarted with a smaller -c: /props, asked again when the refusal comes (issue 21: never learned below it), agrees.
      nCtx = 8192;
      expect(await contextWindows.learnRefusal('m', 8192)).toBe(true);
      expect(await contextWindows.learnRefusal('fixed', 16_384)).toBe(true);
      await expect(contextWindows.get('m')).resolves.toBe(8192);
      await expect(contextWindows.get('fixed')).resolves.toBe(16_384);
      nCtx = 32_768;
      clock.advance(60_001);
      await expect(contextWindows.get('m')).resolves.toBe(32_768);
      await expect(contextWindows.get('fixed')).resolves.toBe(65_536);
    });
  });

  it('caches a discovered window for a minute, then asks again', async () => {
    let nCtx = 8192;
    const upstream = new JsonUpstreamDouble({ 'GET /props': () => props(nCtx) });
    const { contextWindows, clock } = windows(upstream);
    await expect(contextWindows.get('m')).resolves.toBe(8192);
    nCtx = 4096; // llama-server restarted with another -c
    clock.advance(59_999);
    await expect(contextWindows.get('m')).resolves.toBe(8192);
    expect(upstream.count('GET', '/props')).toBe(1);
    clock.advance(1);
    await expect(contextWindows.get('m')).resolves.toBe(4096);
    expect(upstream.count('GET', '/props')).toBe(2);
    expect(contextWindows.snapshot()).toEqual({ m: 4096 });
  });

  it('shares one discovery between concurrent gets', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const upstream = new JsonUpstreamDouble({
      'GET /props': async () => {
        await gate;
        return props(8192);
      },
    });
    const { contextWindows } = windows(upstream);
    const all = Promise.all([contextWindows.get('m'), contextWindows.get('m'), contextWindows.get('m')]);
    release();
    await expect(all).resolves.toEqual([8192, 8192, 8192]);
    expect(upstream.count('GET', '/props')).toBe(1);
  });

  it('asks the upstream once a minute at most, however many model names it is asked about (names come from requests)', async () => {
    // An upstream with no /props: each name would be looked up in /v1/models, which serves none of them.
    const upstream = new JsonUpstreamDouble({ 'GET /v1/models': models({ id: 'served.gguf', meta: { n_ctx: 4096 } }) });
    const { contextWindows, clock } = windows(upstream);
    for (let index = 0; index < 100; index++) await expect(contextWindows.get(`not-served-${index}`)).resolves.toBe(4096);
    expect(upstream.count('GET', '/props')).toBe(1);
    expect(upstream.count('GET', '/v1/models')).toBe(1);
    clock.advance(59_999);
    await contextWindows.get('not-served-again');
    expect(upstream.calls).toHaveLength(2);
    clock.advance(1);
    await contextWindows.get('not-served-0');
    expect(upstream.count('GET', '/props')).toBe(2);
    expect(upstream.count('GET', '/v1/models')).toBe(2);
  });

  it('remembers 256 models at most, so /readyz stays small', async () => {
    const upstream = new JsonUpstreamDouble({ 'GET /props': props(8192) });
    const { contextWindows } = windows(upstream);
    for (let index = 0; index < 1_000; index++) await contextWindows.get(`invented-${index}`);
    expect(contextWindows.size).toBe(256);
    expect(Object.keys(contextWindows.snapshot())).toHaveLength(256);
    expect(contextWindows.snapshot()['invented-999']).toBe(8192);
  });

  it("passes the caller's headers to the discovery calls", async () => {
    const upstream = new JsonUpstreamDouble({ 'GET /v1/models': models({ id: 'm', meta: { n_ctx: 2048 } }) });
    await windows(upstream).contextWindows.get('m', { authorization: 'Bearer client' });
    expect(upstream.calls.map((call) => call.headers)).toEqual([{ authorization: 'Bearer client' }, { authorization: 'Bearer client' }]);
  });
});
