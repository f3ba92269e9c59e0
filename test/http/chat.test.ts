import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ChatContext, ChatPlanner, UsageObservation } from '../../src/app.js';
import { InvalidRequestError } from '../../src/errors.js';
import { FakeUpstream, replies } from '../support/fake-upstream.js';
import { loadFixture } from '../support/fixtures.js';
import { SERVER_COMMENT, SERVER_LINE } from '../support/sse.js';
import { type Proxy, startProxy } from '../support/proxy.js';

const CHAT = '/v1/chat/completions';
const simpleBody = { model: 'm', messages: [{ role: 'user', content: 'Say hi.' }] };

let upstream: FakeUpstream;
let proxy: Proxy | undefined;

beforeAll(async () => {
  upstream = await FakeUpstream.start();
});
afterAll(async () => {
  await upstream.close();
});
afterEach(async () => {
  await proxy?.close();
  proxy = undefined;
  upstream.reset();
});

async function start(options: Parameters<typeof startProxy>[1] = {}): Promise<Proxy> {
  proxy = await startProxy(upstream, options);
  return proxy;
}

describe('forwarding', () => {
  it('forwards the raw bytes when nothing changes, and returns the upstream answer byte for byte', async () => {
    const { app } = await start();
    // Odd spacing and key order: a re-serialization would change these bytes.
    const raw = '{ "messages" : [ {"content":"Say hi.","role":"user"} ],\n  "model":"m", "x_extra": {"b":1,"a":[1,2]} }';
    const response = await app.inject({ method: 'POST', url: CHAT, headers: { 'content-type': 'application/json' }, payload: raw });
    expect(response.statusCode).toBe(200);
    expect(response.rawPayload.equals(loadFixture('chat_nonstream').body)).toBe(true);
    const [received] = upstream.requestsTo(CHAT);
    expect(received?.body.toString()).toBe(raw);
    expect(received?.headers['content-length']).toBe(String(Buffer.byteLength(raw)));
    // Nothing changed, so x-compactor says only what the server spent (issue 36): the fixture's timings, prompt_ms 2.198 and predicted_ms 9.03.
    expect(response.headers['x-compactor']).toBe(SERVER_LINE);
    expect(response.headers['content-length']).toBe(String(response.rawPayload.length));
  });

  it('issue 36: a JSON answer without timings (a server that reports none) gets no x-compactor when nothing changed', async () => {
    const { app } = await start();
    const answer = { id: 'chatcmpl-1', object: 'chat.completion', choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: 'hi' } }], usage: { prompt_tokens: 9, completion_tokens: 1, total_tokens: 10 } };
    upstream.script(CHAT, replies.json(200, answer));
    const response = await app.inject({ method: 'POST', url: CHAT, payload: simpleBody });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual(answer);
    expect(response.headers['x-compactor']).toBeUndefined();
  });

  it('forwards /chat/completions too, with its query string', async () => {
    const { app } = await start();
    const response = await app.inject({ method: 'POST', url: '/chat/completions?debug=1', payload: simpleBody });
    expect(response.statusCode).toBe(200);
    expect(upstream.requests[0]?.path).toBe('/chat/completions?debug=1');
  });

  it('drops hop-by-hop headers and Accept-Encoding, and sets its own Host', async () => {
    const { app } = await start();
    await app.inject({
      method: 'POST',
      url: CHAT,
      payload: simpleBody,
      headers: {
        host: 'proxy.example',
        connection: 'keep-alive, x-hop',
        'x-hop': 'secret-hop',
        'keep-alive': 'timeout=5',
        te: 'trailers',
        'proxy-authorization': 'Basic xyz',
        'accept-encoding': 'gzip, br',
        'x-request-id': 'r1',
      },
    });
    const headers = upstream.requests[0]!.headers;
    expect(headers['x-hop']).toBeUndefined();
    expect(headers['te']).toBeUndefined();
    expect(headers['proxy-authorization']).toBeUndefined();
    expect(headers['accept-encoding']).toBeUndefined();
    expect(headers['keep-alive']).toBeUndefined();
    expect(headers['host']).toBe(`127.0.0.1:${upstream.port}`);
    expect(headers['x-request-id']).toBe('r1');
  });

  it("passes the client's Authorization upstream, or replaces it with upstream.api_key", async () => {
    let { app } = await start();
    await app.inject({ method: 'POST', url: CHAT, payload: simpleBody, headers: { authorization: 'Bearer client-key' } });
    expect(upstream.requests[0]!.headers.authorization).toBe('Bearer client-key');
    await proxy!.close();
    ({ app } = await start({ config: { upstream: { api_key: 'upstream-key' } } }));
    await app.inject({ method: 'POST', url: CHAT, payload: simpleBody, headers: { authorization: 'Bearer client-key' } });
    await app.inject({ method: 'GET', url: '/v1/models', headers: { authorization: 'Bearer client-key' } });
    expect(upstream.requests[1]!.headers.authorization).toBe('Bearer upstream-key');
    expect(upstream.requests[2]!.headers.authorization).toBe('Bearer upstream-key');
  });
});

describe('tool-call pairs', () => {
  const broken = {
    model: 'm',
    messages: [
      { role: 'user', content: 'weather?' },
      { role: 'tool', tool_call_id: 'c9', content: '42' },
      { role: 'user', content: 'and now?' },
    ],
  };

  it('repairs by default, forwards the repaired body with its own Content-Length, and reports it', async () => {
    const { app, logs } = await start();
    const response = await app.inject({ method: 'POST', url: CHAT, payload: broken });
    expect(response.statusCode).toBe(200);
    expect(response.headers['x-compactor']).toBe(`repaired 1 tool pair; ${SERVER_LINE}`);
    const received = upstream.requestsTo(CHAT)[0]!;
    expect(received.json).toEqual({ model: 'm', messages: [broken.messages[0], broken.messages[2]] });
    expect(received.headers['content-length']).toBe(String(received.body.length));
    expect(await logs.request()).toMatchObject({ route: 'chat', status: 200, repairs: 1 });
  });

  it('forwards every field but messages byte for byte: numbers JSON.parse rounds, escapes, order, spacing, duplicates', async () => {
    const { app } = await start();
    const brokenMessages = JSON.stringify(broken.messages);
    const around = (messages: string): string =>
      `{\n  "seed": 18446744073709551615, "temperature":-1e400,"top_p" :1e999,\n  "stop":["\\u00e9\\ud83d\\ude00", "\\"]"],` +
      `"messages":[{"role":"user","content":"dropped: a duplicate"}], "metadata":{"messages":[{"role":"tool"}]},\n` +
      `  "messages" : ${messages} ,\t"model":"m"}`;
    const response = await app.inject({ method: 'POST', url: CHAT, payload: around(brokenMessages), headers: { 'content-type': 'application/json' } });
    expect(response.headers['x-compactor']).toBe(`repaired 1 tool pair; ${SERVER_LINE}`);
    const received = upstream.requestsTo(CHAT)[0]!;
    expect(received.body.toString()).toBe(around(JSON.stringify([broken.messages[0], broken.messages[2]])));
    expect(received.headers['content-length']).toBe(String(received.body.length));
  });

  it('reject answers 400 naming the first problem and sends nothing upstream', async () => {
    const { app } = await start({ config: { pairs: 'reject' } });
    const response = await app.inject({ method: 'POST', url: CHAT, payload: broken });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({
      error: { message: 'messages[1]: tool result "c9" answers no call', type: 'invalid_request_error', param: 'messages[1]', code: 'invalid_tool_pairs' },
    });
    expect(upstream.requests).toHaveLength(0);
  });

  it('off forwards the broken history as it came', async () => {
    const { app } = await start({ config: { pairs: 'off' } });
    const raw = JSON.stringify(broken);
    await app.inject({ method: 'POST', url: CHAT, payload: raw, headers: { 'content-type': 'application/json' } });
    expect(upstream.requestsTo(CHAT)[0]!.body.toString()).toBe(raw);
  });
});

describe('bad requests get a 4xx in OpenAI shape and send nothing upstream', () => {
  const cases: Array<{ name: string; payload: string; contentType?: string; status: number; code: string; message?: RegExp }> = [
    { name: 'not JSON', payload: '{"model": "m", "messages": [', status: 400, code: 'invalid_json' },
    { name: 'an empty body', payload: '', status: 400, code: 'invalid_body' },
    { name: 'a JSON array', payload: '[1,2]', status: 400, code: 'invalid_body' },
    { name: 'no model', payload: '{"messages":[{"role":"user","content":"x"}]}', status: 400, code: 'invalid_body', message: /^model: is required$/ },
    { name: 'a numeric model', payload: '{"model":7,"messages":[{"role":"user","content":"x"}]}', status: 400, code: 'invalid_body', message: /^model: must be a string$/ },
    { name: 'no messages', payload: '{"model":"m"}', status: 400, code: 'invalid_body', message: /^messages: is required$/ },
    { name: 'empty messages', payload: '{"model":"m","messages":[]}', status: 400, code: 'invalid_body', message: /^messages: must not be empty$/ },
    { name: 'messages not a list', payload: '{"model":"m","messages":{"role":"user"}}', status: 400, code: 'invalid_body' },
    { name: 'a message without role', payload: '{"model":"m","messages":[{"content":"x"}]}', status: 400, code: 'invalid_body', message: /^messages\[0\]\.role: is required$/ },
    { name: 'a __proto__ key', payload: '{"model":"m","messages":[{"role":"user","content":"x","__proto__":{"admin":true}}]}', status: 400, code: 'invalid_body' },
    { name: 'an escaped __proto__ key', payload: '{"model":"m","\\u005f_proto__":{"a":1},"messages":[{"role":"user","content":"x"}]}', status: 400, code: 'invalid_body' },
    { name: 'constructor.prototype', payload: '{"model":"m","constructor":{"prototype":{"a":1}},"messages":[{"role":"user","content":"x"}]}', status: 400, code: 'invalid_body' },
    // A JSON body is read whatever its type says, as llama-server reads it (issue 22 item 8); text that is not JSON is refused by its type.
    { name: 'a text/plain body', payload: 'hello', contentType: 'text/plain', status: 415, code: 'unsupported_media_type' },
    { name: 'a form body', payload: 'model=m', contentType: 'application/x-www-form-urlencoded', status: 415, code: 'unsupported_media_type' },
  ];

  for (const testCase of cases) {
    it(testCase.name, async () => {
      const { app } = await start();
      const response = await app.inject({
        method: 'POST',
        url: CHAT,
        payload: testCase.payload,
        headers: { 'content-type': testCase.contentType ?? 'application/json' },
      });
      expect(response.statusCode).toBe(testCase.status);
      const body = response.json<{ error: { code: string; message: string; type: string; param: unknown } }>();
      expect(body.error.code).toBe(testCase.code);
      expect(body.error.type).toBe('invalid_request_error');
      expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
      if (testCase.message !== undefined) expect(body.error.message).toMatch(testCase.message);
      expect(upstream.requests).toHaveLength(0);
    });
  }

  it('a text that merely mentions "__proto__" inside a string is fine', async () => {
    const { app } = await start();
    const payload = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'what does {"__proto__": 1} do?' }] });
    const response = await app.inject({ method: 'POST', url: CHAT, payload, headers: { 'content-type': 'application/json' } });
    expect(response.statusCode).toBe(200);
  });

  it('413 beyond limits.body_bytes, with or without Content-Length', async () => {
    const { app } = await start({ config: { limits: { body_bytes: 1024 } } });
    const large = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(2000) }] });
    const withLength = await app.inject({ method: 'POST', url: CHAT, payload: large, headers: { 'content-type': 'application/json' } });
    expect(withLength.statusCode).toBe(413);
    expect(withLength.json()).toMatchObject({ error: { code: 'request_too_large', type: 'invalid_request_error' } });
    const { Readable } = await import('node:stream');
    const chunked = await app.inject({
      method: 'POST',
      url: CHAT,
      payload: Readable.from([Buffer.from(large.slice(0, 1000)), Buffer.from(large.slice(1000))]),
      headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
    });
    expect(chunked.statusCode).toBe(413);
    expect(upstream.requests).toHaveLength(0);
  });
});

describe('auth.keys', () => {
  it('401 without one of the keys, for chat and pass-through; ops routes stay open', async () => {
    const { app } = await start({ config: { auth: { keys: ['sk-one', 'sk-two'] } } });
    for (const authorization of [undefined, 'Bearer nope', 'Bearer sk-one-and-more', 'Basic sk-one', 'sk-two']) {
      const response = await app.inject({ method: 'POST', url: CHAT, payload: simpleBody, headers: authorization === undefined ? {} : { authorization } });
      expect(response.statusCode, String(authorization)).toBe(401);
      expect(response.json()).toMatchObject({ error: { type: 'authentication_error', code: 'invalid_api_key' } });
    }
    expect((await app.inject({ method: 'GET', url: '/v1/models' })).statusCode).toBe(401);
    expect(upstream.requests).toHaveLength(0);
    expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    const allowed = await app.inject({ method: 'POST', url: CHAT, payload: simpleBody, headers: { authorization: 'Bearer sk-two' } });
    expect(allowed.statusCode).toBe(200);
  });
});

describe('upstream errors', () => {
  it("pass through with their status and body (llama-server's 400 exceed_context_size_error)", async () => {
    upstream.script(CHAT, replies.fixture('ctx_exceeded_chat'));
    const { app } = await start();
    const response = await app.inject({ method: 'POST', url: CHAT, payload: simpleBody });
    expect(response.statusCode).toBe(400);
    expect(response.rawPayload.equals(loadFixture('ctx_exceeded_chat').body)).toBe(true);
    expect(response.json()).toMatchObject({ error: { type: 'exceed_context_size_error', n_ctx: 2048 } });
  });

  it('503 while loading passes through with Retry-After', async () => {
    upstream.script(CHAT, replies.json(503, { error: { code: 503, message: 'Loading model', type: 'unavailable_error' } }, { 'retry-after': '7' }));
    const { app } = await start();
    const response = await app.inject({ method: 'POST', url: CHAT, payload: simpleBody });
    expect(response.statusCode).toBe(503);
    expect(response.headers['retry-after']).toBe('7');
    expect(response.json()).toEqual({ error: { code: 503, message: 'Loading model', type: 'unavailable_error' } });
  });

  it('502 for an HTML error page, naming no address', async () => {
    upstream.script(CHAT, replies.htmlError(502));
    const { app } = await start();
    const response = await app.inject({ method: 'POST', url: CHAT, payload: simpleBody });
    expect(response.statusCode).toBe(502);
    expect(response.json()).toMatchObject({ error: { code: 'upstream_bad_response', type: 'server_error' } });
    expect(response.body).not.toContain('127.0.0.1');
    expect(response.body).not.toContain(String(upstream.port));
  });

  it('502 when the upstream refuses the connection or hangs up', async () => {
    const closed = await FakeUpstream.start();
    const url = closed.url;
    await closed.close();
    proxy = await startProxy(upstream, { config: { upstream: { url } } });
    const refused = await proxy.app.inject({ method: 'POST', url: CHAT, payload: simpleBody });
    expect(refused.statusCode).toBe(502);
    expect(refused.json()).toMatchObject({ error: { code: 'upstream_unreachable', message: 'the upstream server cannot be reached (connection refused)' } });
    expect(refused.body).not.toContain(url.replace('http://', ''));
    await proxy.close();

    await start();
    upstream.script(CHAT, replies.hangUp());
    const hungUp = await proxy!.app.inject({ method: 'POST', url: CHAT, payload: simpleBody });
    expect(hungUp.statusCode).toBe(502);
    expect(hungUp.json()).toMatchObject({ error: { code: 'upstream_unreachable' } });
  });

  it('504 when the headers take longer than upstream.timeouts.headers_ms', async () => {
    upstream.script(CHAT, replies.slowHeaders(3_000));
    const { app } = await start({ config: { upstream: { timeouts: { headers_ms: 200 } } } });
    const response = await app.inject({ method: 'POST', url: CHAT, payload: simpleBody });
    expect(response.statusCode).toBe(504);
    expect(response.json()).toMatchObject({ error: { code: 'upstream_timeout', type: 'server_error' } });
    expect(upstream.requestsTo(CHAT)).toHaveLength(1); // no retry
  });
});

describe('draining and readiness', () => {
  it('answers 503 + Retry-After while draining, sends nothing upstream; /healthz stays 200', async () => {
    const { app } = await start();
    expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
    app.proxy.startDraining();
    const response = await app.inject({ method: 'POST', url: CHAT, payload: simpleBody });
    expect(response.statusCode).toBe(503);
    expect(response.headers['retry-after']).toBe('5');
    expect(response.json()).toMatchObject({ error: { code: 'shutting_down' } });
    expect((await app.inject({ method: 'GET', url: '/props' })).statusCode).toBe(503);
    expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(503);
    expect(upstream.requests.filter((request) => request.path !== '/health')).toHaveLength(0);
  });

  it('/readyz is 503 while the upstream loads or is down', async () => {
    upstream.route('GET', '/health', replies.json(503, { error: { code: 503, message: 'Loading model', type: 'unavailable_error' } }));
    const { app } = await start();
    const loading = await app.inject({ method: 'GET', url: '/readyz' });
    expect(loading.statusCode).toBe(503);
    expect(loading.json()).toEqual({ status: 'upstream unavailable', upstream_status: 503 });
    upstream.refuseConnections();
    expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(503);
    expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
  });
});

describe('the planner seam', () => {
  it('forwards a rewritten body with a new Content-Length and the report in x-compactor', async () => {
    const seen: ChatContext[] = [];
    const rawSeen: string[] = [];
    const planner: ChatPlanner = async (context) => {
      seen.push(context);
      rawSeen.push(context.raw.toString());
      return { body: { ...context.body, messages: [{ role: 'user', content: 'short' }] }, report: 'summarized 2 messages -> 1 summary (10 -> 2 tokens, 0.1s) →' };
    };
    const { app } = await start({ deps: { planner } });
    const response = await app.inject({ method: 'POST', url: CHAT, payload: simpleBody, headers: { authorization: 'Bearer k' } });
    expect(response.statusCode).toBe(200);
    expect(response.headers['x-compactor']).toBe(`summarized 2 messages -> 1 summary (10 -> 2 tokens, 0.1s) ?; ${SERVER_LINE}`);
    const received = upstream.requestsTo(CHAT)[0]!;
    expect(received.json).toEqual({ model: 'm', messages: [{ role: 'user', content: 'short' }] });
    expect(received.headers['content-length']).toBe(String(received.body.length));
    expect(seen[0]).toMatchObject({ changed: false, keyTenant: '', pairRepairs: [] });
    // The client's bytes while planning; let go of once forwarded (a long stream does not hold them).
    expect(rawSeen).toEqual([JSON.stringify(simpleBody)]);
    expect(seen[0]!.raw.length).toBe(0);
    expect(seen[0]!.signal.aborted).toBe(false);
  });

  it('forwards the raw bytes when the planner changes nothing', async () => {
    const { app } = await start({ deps: { planner: async () => undefined } });
    const raw = '{"model":"m",   "messages":[{"role":"user","content":"hi"}]}';
    await app.inject({ method: 'POST', url: CHAT, payload: raw, headers: { 'content-type': 'application/json' } });
    expect(upstream.requestsTo(CHAT)[0]!.body.toString()).toBe(raw);
  });

  it('gives the planner the client bytes as the proof of its messages only when they are the parsed messages (issue 26 item 3)', async () => {
    // Read while planning: once forwarded, the bytes are let go of.
    const seen: Array<[boolean, string | undefined]> = [];
    const { app } = await start({ deps: { planner: async (context) => void seen.push([context.changed, context.sourceBytes?.toString()]) } });
    const raw = '{"model":"m", "messages":[{"role":"user","content":"hi"}]}';
    await app.inject({ method: 'POST', url: CHAT, payload: raw, headers: { 'content-type': 'application/json' } });
    // A call without its result is repaired: the messages are no longer what the bytes say.
    const unpaired = {
      model: 'm',
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
        { role: 'user', content: 'and?' },
      ],
    };
    await app.inject({ method: 'POST', url: CHAT, payload: unpaired });
    // Another format's chat view is made from its own fields.
    await app.inject({ method: 'POST', url: '/v1/messages', payload: { model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] } });
    expect(seen).toEqual([
      [false, raw],
      [true, undefined],
      [false, undefined],
    ]);
  });

  it("a planner's ProxyError becomes the answer, and nothing goes upstream", async () => {
    const planner: ChatPlanner = async () => {
      throw new InvalidRequestError({ code: 'invalid_body', message: 'too long', param: 'messages' });
    };
    const { app } = await start({ deps: { planner } });
    const response = await app.inject({ method: 'POST', url: CHAT, payload: simpleBody });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ error: { message: 'too long', type: 'invalid_request_error', param: 'messages', code: 'invalid_body' } });
    expect(upstream.requests).toHaveLength(0);
  });

  it('a planner bug is a 500 that says nothing of it', async () => {
    const { app } = await start({ deps: { planner: async () => { throw new Error('secret internals'); } } });
    const response = await app.inject({ method: 'POST', url: CHAT, payload: simpleBody });
    expect(response.statusCode).toBe(500);
    expect(response.body).not.toContain('secret internals');
  });

  it('progress comments come first on a streamed request, then the report, then the stream', async () => {
    const planner: ChatPlanner = async (context) => {
      expect(context.progress('compacting 84 messages (chunk 1/2)')).toBe(true);
      expect(context.progress('compacting 84 messages (chunk 2/2)')).toBe(true);
      return { body: context.body, report: 'summarized 84 messages' };
    };
    const { app } = await start({ deps: { planner } });
    const response = await app.inject({ method: 'POST', url: CHAT, payload: { ...simpleBody, stream: true } });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toBe('text/event-stream');
    expect(response.headers['x-accel-buffering']).toBe('no');
    expect(response.body.startsWith(': compacting 84 messages (chunk 1/2)\n\n: compacting 84 messages (chunk 2/2)\n\n: summarized 84 messages\n\ndata: ')).toBe(true);
    // At the end, what the server spent (issue 36): a last comment, and the whole line in the trailer the early head declared.
    expect(response.body.endsWith(`data: [DONE]\n\n${SERVER_COMMENT}`)).toBe(true);
    expect(response.headers['trailer']).toBe('x-compactor');
    expect(response.trailers['x-compactor']).toBe(`summarized 84 messages; ${SERVER_LINE}`);
  });

  it('an HTTP/1.0 client of a stream that must wait gets the report and the server seconds as comments, and no trailer', async () => {
    // Trailers need a chunked body (RFC 9112 § 7.1.2): HTTP/1.0 has none, and Node throws ERR_HTTP_TRAILER_INVALID on a head
    // that declares one there. The early head used to declare it whatever the client's version.
    const planner: ChatPlanner = async (context) => {
      context.progress('compacting 84 messages');
      return { body: context.body, report: 'summarized 84 messages' };
    };
    const { url } = await start({ listen: true, deps: { planner } });
    const { hostname, port } = new URL(url);
    const body = JSON.stringify({ ...simpleBody, stream: true });
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), hostname, () => {
        socket.write(`POST ${CHAT} HTTP/1.0\r\nHost: ${hostname}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      });
      let text = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => (text += chunk));
      // HTTP/1.0 without keep-alive: the answer ends with the connection.
      socket.once('close', () => resolve(text));
      socket.once('error', reject);
    });
    const headEnd = raw.indexOf('\r\n\r\n');
    expect(raw.slice(0, headEnd)).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(raw.slice(0, headEnd)).not.toMatch(/\r\ntrailer:/i);
    expect(raw.slice(headEnd + 4)).toMatch(/^: compacting 84 messages\n\n: summarized 84 messages\n\ndata: /);
    expect(raw.endsWith(`data: [DONE]\n\n${SERVER_COMMENT}`)).toBe(true);
  });

  it('after progress, an upstream error arrives as an SSE error event without [DONE]', async () => {
    upstream.script(CHAT, replies.fixture('ctx_exceeded_chat_stream'));
    const planner: ChatPlanner = async (context) => {
      context.progress('compacting');
      return undefined;
    };
    const { app } = await start({ deps: { planner } });
    const response = await app.inject({ method: 'POST', url: CHAT, payload: { ...simpleBody, stream: true } });
    expect(response.statusCode).toBe(200);
    expect(response.body).toBe(`: compacting\n\ndata: ${loadFixture('ctx_exceeded_chat_stream').body.toString()}\n\n`);
    expect(response.body).not.toContain('[DONE]');
  });

  it('after progress, a compressed stream cannot follow: an SSE error event says why', async () => {
    upstream.script(CHAT, ({ response }) => {
      response.writeHead(200, { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' });
      response.end(gzipSync('data: [DONE]\n\n'));
    });
    const planner: ChatPlanner = async (context) => {
      context.progress('compacting');
      return undefined;
    };
    const { app } = await start({ deps: { planner } });
    const response = await app.inject({ method: 'POST', url: CHAT, payload: { ...simpleBody, stream: true } });
    expect(response.headers['content-encoding']).toBeUndefined();
    expect(response.body).toMatch(/^: compacting\n\ndata: \{"error":\{"message":"the upstream compressed its stream[^"]*","type":"server_error","param":null,"code":"[a-z_]+"\}\}\n\n$/);
  });

  it('progress does nothing for a request that is not streamed', async () => {
    let answered: boolean | undefined;
    const { app } = await start({ deps: { planner: async (context) => { answered = context.progress('x'); return undefined; } } });
    const response = await app.inject({ method: 'POST', url: CHAT, payload: simpleBody });
    expect(answered).toBe(false);
    expect(response.statusCode).toBe(200);
  });
});

describe('onUsage', () => {
  async function observe(body: Record<string, unknown>): Promise<UsageObservation> {
    let resolve: (observation: UsageObservation) => void = () => undefined;
    const observed = new Promise<UsageObservation>((done) => (resolve = done));
    const { app } = await start({ deps: { onUsage: (observation) => resolve(observation) } });
    const response = await app.inject({ method: 'POST', url: CHAT, payload: body });
    expect(response.statusCode).toBe(200);
    return observed;
  }

  it('reads usage and timings from a streamed answer with include_usage', async () => {
    const observation = await observe({ ...simpleBody, stream: true, stream_options: { include_usage: true } });
    expect(observation.streamed).toBe(true);
    expect(observation.usage).toMatchObject({ prompt_tokens: 25, completion_tokens: 12, total_tokens: 37 });
    expect(observation.timings).toMatchObject({ cache_n: 24, prompt_n: 1 });
    expect(observation.request).toMatchObject({ model: simpleBody.model, messages: simpleBody.messages.length, changed: false });
  });

  it('reads timings from a stream without usage', async () => {
    const observation = await observe({ ...simpleBody, stream: true });
    expect(observation.usage).toBeUndefined();
    expect(observation.timings).toMatchObject({ cache_n: 24, prompt_n: 1 });
  });

  it('reads usage from a JSON answer', async () => {
    const observation = await observe(simpleBody);
    expect(observation.streamed).toBe(false);
    expect(observation.usage).toMatchObject({ prompt_tokens: 25 });
    expect(observation.timings).toMatchObject({ cache_n: 0, prompt_n: 25 });
    expect(observation.forwardedBytes).toBe(JSON.stringify(simpleBody).length);
  });
});
