import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  UpstreamBadResponseError,
  UpstreamStatusError,
  UpstreamTimeoutError,
  UpstreamUnreachableError,
} from '../../src/errors.js';
import { UpstreamClient } from '../../src/upstream/client.js';
import { FakeUpstream, replies } from '../support/fake-upstream.js';
import { loadFixture } from '../support/fixtures.js';

const timeouts = { connectMs: 2_000, headersMs: 5_000, idleMs: 5_000 };
let upstream: FakeUpstream;
let client: UpstreamClient;

beforeAll(async () => {
  upstream = await FakeUpstream.start();
  client = new UpstreamClient({ url: upstream.url, timeouts });
});
afterAll(async () => {
  await client.close();
  await upstream.close();
});
afterEach(() => upstream.reset());

describe('UpstreamClient', () => {
  it('complete() posts a non-streamed completion and returns the parsed answer', async () => {
    const answer = await client.complete(
      { model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true, stream_options: { include_usage: true } },
      { headers: { Authorization: 'Bearer client' } },
    );
    expect(answer).toEqual(JSON.parse(loadFixture('chat_nonstream').body.toString()));
    const sent = upstream.requestsTo('/v1/chat/completions')[0]!;
    expect(sent.json).toEqual({ model: 'm', messages: [{ role: 'user', content: 'x' }], stream: false });
    expect(sent.headers.authorization).toBe('Bearer client');
  });

  it('the configured api_key wins over a passed Authorization', async () => {
    const keyed = new UpstreamClient({ url: upstream.url, apiKey: 'server-key', timeouts });
    await keyed.getJson('/props', { headers: { authorization: 'Bearer client' } });
    expect(upstream.requestsTo('/props')[0]!.headers.authorization).toBe('Bearer server-key');
    await keyed.close();
  });

  it('getJson and postJson read /props, /v1/models and /tokenize', async () => {
    expect(await client.getJson('/props')).toMatchObject({ default_generation_settings: { n_ctx: 2048 } });
    expect(await client.getJson('/v1/models')).toMatchObject({ data: [{ meta: { n_ctx: 2048, n_ctx_train: 4096 } }] });
    expect(await client.postJson('/tokenize', { content: 'hello world' })).toEqual({ tokens: [22172, 3186] });
    expect(upstream.requestsTo('/tokenize')[0]!.headers['content-type']).toBe('application/json');
  });

  it('an error status rejects with UpstreamStatusError carrying the upstream body', async () => {
    upstream.script('/v1/chat/completions', replies.fixture('ctx_exceeded_chat'));
    const error = await client.complete({ model: 'm', messages: [] }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(UpstreamStatusError);
    const status = error as UpstreamStatusError;
    expect(status.status).toBe(400);
    expect(status.message).toMatch(/exceeds the available context size/);
    expect(status.toBody()).toEqual(JSON.parse(loadFixture('ctx_exceeded_chat').body.toString()));
  });

  it('a body that is not JSON rejects with UpstreamBadResponseError', async () => {
    upstream.script('/props', ({ response }) => {
      response.end('<html>hi</html>');
    });
    await expect(client.getJson('/props')).rejects.toBeInstanceOf(UpstreamBadResponseError);
    upstream.script('/props', replies.htmlError(502));
    await expect(client.getJson('/props')).rejects.toMatchObject({ status: 502, code: 'upstream_error' });
  });

  it('an answer over maxBytes is refused', async () => {
    await expect(client.getJson('/props', { maxBytes: 100 })).rejects.toBeInstanceOf(UpstreamBadResponseError);
  });

  it('timeoutMs bounds the whole call; a caller signal aborts it with its reason', async () => {
    upstream.script('/props', replies.slowHeaders(10_000));
    await expect(client.getJson('/props', { timeoutMs: 100 })).rejects.toBeInstanceOf(UpstreamTimeoutError);
    upstream.script('/props', replies.slowHeaders(10_000));
    const controller = new AbortController();
    const call = client.getJson('/props', { signal: controller.signal });
    setTimeout(() => controller.abort(new Error('client left')), 50);
    await expect(call).rejects.toThrow('client left');
    await upstream.waitFor(() => upstream.requestsTo('/props').every((request) => request.abortedAt !== null), { what: 'the aborts' });
  });

  it('an unreachable upstream rejects with UpstreamUnreachableError, naming no address', async () => {
    const gone = await FakeUpstream.start();
    const url = gone.url;
    await gone.close();
    const unreachable = new UpstreamClient({ url, timeouts });
    const error = await unreachable.getJson('/props').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(UpstreamUnreachableError);
    expect((error as Error).message).not.toContain(String(new URL(url).port));
    expect(await unreachable.health()).toEqual({ ready: false, status: null });
    await unreachable.close();
  });

  it('a base path in the URL prefixes every request', async () => {
    const prefixed = new UpstreamClient({ url: `${upstream.url}/llama/`, timeouts });
    await prefixed.getJson('/props').catch(() => undefined);
    expect(upstream.requests.at(-1)?.path).toBe('/llama/props');
    await prefixed.close();
  });

  it('health() is ready on 200, falls back to /v1/models where /health is missing', async () => {
    expect(await client.health()).toEqual({ ready: true, status: 200 });
    upstream.script('/health', replies.json(404, { error: 'not found' }));
    expect(await client.health()).toEqual({ ready: true, status: 200 });
    expect(upstream.requestsTo('/v1/models')).toHaveLength(1);
  });
});
