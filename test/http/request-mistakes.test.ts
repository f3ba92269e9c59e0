import { describe, expect, it } from 'vitest';
import { FakeUpstream, replies } from '../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';
import { conversation } from '../support/conversation.js';
import { SimulatedLlama } from '../support/simulated-llama.js';

/**
 * What a user tries by hand gets what llama-server would give, or an error
 * that names the mistake (issue 22, item 8).
 */

const closed = closedAfterEachTest();
const BODY = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });

async function proxied() {
  const upstream = closed(await FakeUpstream.start());
  upstream.route('POST', '/v1/chat/completions', replies.json(200, { id: 'x', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'hello' }, finish_reason: 'stop' }] }));
  const proxy = closed(await startProxy(upstream));
  return { upstream, proxy };
}

describe('requests made by hand', () => {
  it("curl -d: a JSON body sent as a form (curl's default Content-Type) is accepted, as llama-server accepts it", async () => {
    const { proxy, upstream } = await proxied();
    const response = await proxy.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: BODY });
    expect(response.statusCode).toBe(200);
    expect(upstream.requests.at(-1)?.body.toString()).toBe(BODY);
    // What is not JSON is still refused, naming its type.
    const form = await proxy.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'model=m' });
    expect(form.statusCode).toBe(415);
  });

  it('GET /v1/compact answers 405 with Allow: POST, not the upstream\'s 404', async () => {
    const { proxy, upstream } = await proxied();
    const response = await proxy.app.inject({ method: 'GET', url: '/v1/compact' });
    expect(response.statusCode).toBe(405);
    expect(response.headers['allow']).toBe('POST');
    expect(response.json()).toMatchObject({ error: { type: 'invalid_request_error', code: 'method_not_allowed' } });
    expect(upstream.requests).toHaveLength(0);
  });

  it('{"messages":"nope"} names messages too, not only model', async () => {
    const { proxy } = await proxied();
    const response = await proxy.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { 'content-type': 'application/json' }, payload: '{"messages":"nope"}' });
    expect(response.statusCode).toBe(400);
    const message = (response.json() as { error: { message: string } }).error.message;
    expect(message).toContain('model');
    expect(message).toContain('messages');
  });

  it("/v1/compact's log line counts the bytes of its answer", async () => {
    const upstream = closed(await FakeUpstream.start());
    new SimulatedLlama(upstream, { window: 4096 });
    const proxy = closed(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true } } }));
    const messages = conversation({ turns: 6, stepsPerTurn: 2, resultBytes: 300 });
    const response = await fetch(`${proxy.url}/v1/compact`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'sim', messages, force: true }) });
    expect(response.status).toBe(200);
    const text = await response.text();
    const line = await proxy.logs.request((entry) => entry['route'] === 'compact');
    expect(line['bytes']).toBe(Buffer.byteLength(text));
  });
});
