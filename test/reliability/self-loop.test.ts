import { afterEach, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import { LogCapture, testConfig } from '../support/proxy.js';
import { freePort } from '../support/free-port.js';

/**
 * Issue 12, item 6: a proxy pointed at itself (`--upstream` = its own
 * address) stormed: 33k requests and 665 MB in 11 s. compactor marks what it
 * sends with `Via` and answers 508 to a request that already went through it.
 */

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});


describe('a compactor whose upstream is itself', () => {
  it('answers 508 in OpenAI shape on every route, after one pass, and says why in the log', async () => {
    const port = await freePort();
    const logs = new LogCapture();
    app = buildApp(testConfig(`http://127.0.0.1:${port}`, { listen: { port } }), { logStream: logs });
    await app.listen({ host: '127.0.0.1', port });
    const base = `http://127.0.0.1:${port}`;

    const models = await fetch(`${base}/v1/models`);
    expect(models.status).toBe(508);
    expect(await models.json()).toMatchObject({ error: { code: 'loop_detected', type: 'server_error', message: expect.stringContaining('upstream.url') as unknown } });

    const chat = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(chat.status).toBe(508);
    await chat.arrayBuffer();

    // Each client request made exactly one more pass through compactor, not a storm.
    const requests = logs.requests();
    expect(requests.length).toBe(4);
    expect(requests.filter((line) => line['status'] === 508)).toHaveLength(4);
    const warnings = logs.entries().filter((line) => line['level'] === 40 && String(line['msg']).includes('points at compactor itself'));
    expect(warnings).toHaveLength(1);
  });

  it('still passes requests that went through another compactor (a chain made on purpose)', async () => {
    const { viaWithOwn, cameThroughHere, VIA_NAME } = await import('../../src/upstream/via.js');
    expect(cameThroughHere('1.1 compactor-00000000')).toBe(VIA_NAME === 'compactor-00000000');
    expect(cameThroughHere(viaWithOwn('1.1 nginx'))).toBe(true);
    expect(cameThroughHere('1.1 nginx, 1.0 squid')).toBe(false);
    expect(cameThroughHere(undefined)).toBe(false);
  });
});
