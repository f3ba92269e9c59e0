import { afterEach, describe, expect, it } from 'vitest';
import { inspectUpstream } from '../../src/upstream/inspect.js';
import { UpstreamClient } from '../../src/upstream/client.js';
import { FakeUpstream, replies } from '../support/fake-upstream.js';

/** What compactor logs about its upstream at start: found, not guessed. */

const TIMEOUTS = { connectMs: 1_000, headersMs: 2_000, idleMs: 2_000 };
let upstream: FakeUpstream | undefined;
let client: UpstreamClient | undefined;

afterEach(async () => {
  await client?.close();
  await upstream?.close();
  client = undefined;
  upstream = undefined;
});

async function inspect(prepare: (upstream: FakeUpstream) => void = () => undefined): Promise<Awaited<ReturnType<typeof inspectUpstream>>> {
  upstream = await FakeUpstream.start();
  prepare(upstream);
  client = new UpstreamClient({ url: upstream.url, timeouts: TIMEOUTS });
  return inspectUpstream(client);
}

describe('inspectUpstream', () => {
  it("reports the recorded llama-server's model, its window per slot (/props) and its slots", async () => {
    expect(await inspect()).toEqual({ state: 'ready', kind: 'llama-server', models: [{ id: '/models/tiny.gguf', window: 2048, source: '/props' }], slots: 1, truncatesSilently: false });
  });

  it('takes the window of each model from /v1/models when /props is not served', async () => {
    const found = await inspect((fake) => {
      fake.route('GET', '/props', replies.json(404, { error: { message: 'not found' } }));
      fake.route('GET', '/v1/models', replies.json(200, { data: [{ id: 'a', meta: { n_ctx: 8192 } }, { id: 'b', meta: { n_ctx_train: 4096 } }, { id: 'c' }] }));
    });
    expect(found).toEqual({
      state: 'ready',
      kind: 'llama-server',
      models: [
        { id: 'a', window: 8192, source: '/v1/models meta.n_ctx' },
        { id: 'b', window: 4096, source: '/v1/models meta.n_ctx' },
        { id: 'c', window: null, source: 'not reported' },
      ],
      slots: null,
      truncatesSilently: false,
    });
  });

  it('says a server still loading its model is not ready (503), not that it is', async () => {
    const found = await inspect((fake) => fake.route('GET', '/health', replies.json(503, { error: { message: 'Loading model' } })));
    expect(found).toMatchObject({ state: 'not ready', status: 503, reason: expect.stringContaining('loading') as unknown });
  });

  it('says a server that wants a key wants one', async () => {
    const found = await inspect((fake) => fake.route('GET', '/v1/models', replies.json(401, { error: { message: 'Invalid API Key' } })));
    expect(found).toMatchObject({ state: 'not ready', status: 401, reason: expect.stringContaining('upstream.api_key') as unknown });
  });

  it('says why an upstream that refuses connections cannot be reached', async () => {
    upstream = await FakeUpstream.start();
    const port = upstream.port;
    await upstream.close();
    upstream = undefined;
    client = new UpstreamClient({ url: `http://127.0.0.1:${port}`, timeouts: TIMEOUTS });
    expect(await inspectUpstream(client)).toMatchObject({ state: 'unreachable', reason: expect.stringContaining('connection refused') as unknown });
  });
});
