import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeUpstream, replies } from '../support/fake-upstream.js';
import { postJson, send } from '../support/http-client.js';
import { startMain } from '../support/main-process.js';

/** The real command line: flags and environment, listening, graceful shutdown. */

let upstream: FakeUpstream;

beforeAll(async () => {
  upstream = await FakeUpstream.start();
});
afterAll(async () => {
  await upstream.close();
});

describe('compactor (main.ts)', () => {
  it('listens where the flags say, forwards to COMPACTOR_UPSTREAM_URL, and drains on SIGTERM', async () => {
    const main = startMain(['--host', '127.0.0.1', '--port', '0'], { COMPACTOR_UPSTREAM_URL: upstream.url, COMPACTOR_CONFIG: '' });
    const url = await main.url;
    expect((await send(`${url}/healthz`)).status).toBe(200);
    expect((await send(`${url}/readyz`)).status).toBe(200);
    expect((await send(`${url}/v1/models`)).status).toBe(200);
    // Log lines are written in batches, but a quiet proxy's line still leaves within the flush period.
    const deadline = Date.now() + 2_000;
    while (!main.output().includes('"path":"/v1/models"') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(main.output()).toContain('"path":"/v1/models"');

    // At start it says what it found upstream, and claims no readiness it did not check.
    expect(main.output()).toMatch(/"msg":"compactor \d+\.\d+\.\d+ listening on http:\/\/127\.0\.0\.1:\d+: mode compact, store memory, upstream /);
    expect(main.output()).toMatch(/"kind":"llama-server","models":\[\{"id":"\/models\/tiny\.gguf","window":2048,"source":"\/props"\}\],"slots":1,"msg":"upstream ready: llama-server, 1 model\(s\)"/);
    expect(main.output()).not.toContain('compactor ready');

    // A request in flight when SIGTERM arrives still gets its whole answer.
    upstream.script('/v1/chat/completions', replies.slowHeaders(500));
    const inFlight = postJson(`${url}/v1/chat/completions`, { model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    await upstream.waitFor(() => upstream.requestsTo('/v1/chat/completions').length === 1, { what: 'the chat request' });
    main.child.kill('SIGTERM');
    const answer = await inFlight;
    expect(answer.status).toBe(200);
    expect(answer.ending).toBe('ended');
    expect(await main.exit).toBe(0);
    expect(main.output()).toContain('shutting down');
    // What was still gathered at exit is written too.
    expect(main.output()).toContain('"path":"/v1/chat/completions"');
  });

  it('says at start that an upstream cannot be reached, and why', async () => {
    const closed = await FakeUpstream.start();
    const port = closed.port;
    await closed.close();
    const main = startMain(['--host', '127.0.0.1', '--port', '0'], { COMPACTOR_UPSTREAM_URL: `http://127.0.0.1:${port}`, COMPACTOR_CONFIG: '' });
    await main.url;
    const deadline = Date.now() + 5_000;
    while (!main.output().includes('upstream unreachable') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(main.output()).toMatch(/"level":40,[^\n]*"msg":"upstream unreachable: [^"]*connection refused/);
    main.child.kill('SIGTERM');
    expect(await main.exit).toBe(0);
  });

  it('takes an upstream URL ending in /v1 without it, and warns at start', async () => {
    const main = startMain(['--host', '127.0.0.1', '--port', '0'], { COMPACTOR_UPSTREAM_URL: `${upstream.url}/v1`, COMPACTOR_CONFIG: '' });
    const url = await main.url;
    expect((await send(`${url}/v1/models`)).status).toBe(200);
    expect(upstream.requestsTo('/v1/models').length).toBeGreaterThan(0);
    expect(upstream.requestsTo('/v1/v1/models')).toEqual([]);
    expect(main.output()).toMatch(/"level":40,[^\n]*"msg":"upstream.url ends in \/v1[^"]*forwarding to http:\/\/127\.0\.0\.1:\d+ instead/);
    main.child.kill('SIGTERM');
    expect(await main.exit).toBe(0);
  });
});
