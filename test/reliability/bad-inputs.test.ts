import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type FakeUpstream, chatStreamEvents, replies } from '../support/fake-upstream.js';
import { postJson, send } from '../support/http-client.js';
import { type Proxy, sharedForSuite, startProxy } from '../support/proxy.js';
import { SERVER_COMMENT, parseSse } from '../support/sse.js';
import { rawRequest } from './raw-http.js';

/**
 * Issue 7, "Bad inputs": each gets the right 4xx in OpenAI's shape, nothing is
 * sent upstream, and the process is unharmed (the next request is answered).
 * Rows already covered elsewhere are named in test/reliability/README.md.
 */

const CHAT = '/v1/chat/completions';
// Small, so "10× over" stays cheap; the big-history cases use a proxy of their own.
const LIMIT = 64 * 1024;
const simple = { model: 'm', messages: [{ role: 'user', content: 'Say hi.' }] };

let upstream: FakeUpstream;
let proxy: Proxy;

sharedForSuite({ listen: true, config: { limits: { body_bytes: LIMIT } } }, (started) => {
  ({ upstream, proxy } = started);
});
afterEach(async () => {
  // The process is unharmed: the next ordinary request is answered.
  upstream.reset();
  const next = await postJson(proxy.url + CHAT, simple);
  expect(next.status).toBe(200);
  upstream.reset();
});

function hostHeader(url: string): string {
  return new URL(url).host;
}

/** A request head for the chat route, written by hand. */
function head(lines: readonly string[]): string {
  return [`POST ${CHAT} HTTP/1.1`, `Host: ${hostHeader(proxy.url)}`, ...lines, '', ''].join('\r\n');
}

function expectOpenAIError(body: string | Buffer, status: number, answerStatus: number): { code: string; message: string } {
  expect(answerStatus).toBe(status);
  const parsed = JSON.parse(body.toString()) as { error: { code: string; message: string; type: string; param: unknown } };
  expect(Object.keys(parsed.error).sort()).toEqual(['code', 'message', 'param', 'type']);
  expect(parsed.error.type).toBe(status >= 500 ? 'server_error' : 'invalid_request_error');
  return parsed.error;
}

describe('bodies over the limit', () => {
  it('one byte over limits.body_bytes: 413, nothing sent upstream', async () => {
    const body = JSON.stringify({ ...simple, pad: '' });
    const padded = JSON.stringify({ ...simple, pad: 'x'.repeat(LIMIT + 1 - body.length) });
    expect(Buffer.byteLength(padded)).toBe(LIMIT + 1);
    const answer = await send(proxy.url + CHAT, { method: 'POST', headers: { 'content-type': 'application/json' }, body: padded });
    expect(expectOpenAIError(answer.body, 413, answer.status).code).toBe('request_too_large');
    // Exactly at the limit is accepted.
    const atLimit = JSON.stringify({ ...simple, pad: 'x'.repeat(LIMIT - body.length) });
    expect((await send(proxy.url + CHAT, { method: 'POST', headers: { 'content-type': 'application/json' }, body: atLimit })).status).toBe(200);
    expect(upstream.requestsTo(CHAT)).toHaveLength(1);
    upstream.reset();
  });

  it('10× over, announced by Content-Length or sent chunked: 413, nothing sent upstream', async () => {
    const huge = JSON.stringify({ ...simple, pad: 'x'.repeat(10 * LIMIT) });
    const announced = await send(proxy.url + CHAT, { method: 'POST', headers: { 'content-type': 'application/json' }, body: huge });
    expect(expectOpenAIError(announced.body, 413, announced.status).code).toBe('request_too_large');
    const pieces = [];
    for (let start = 0; start < huge.length; start += 16 * 1024) pieces.push(huge.slice(start, start + 16 * 1024));
    const chunked = await rawRequest(
      proxy.url,
      head(['Content-Type: application/json', 'Transfer-Encoding: chunked']),
      { more: [...pieces.map((piece) => `${Buffer.byteLength(piece).toString(16)}\r\n${piece}\r\n`), '0\r\n\r\n'] },
    );
    expect(expectOpenAIError(chunked.body, 413, chunked.status).code).toBe('request_too_large');
    expect(upstream.requests).toHaveLength(0);
  });
});

describe('framing that lies', () => {
  it('a Content-Length larger than the body sent (then the client half-closes): a 400 or a closed connection, never a 5xx', async () => {
    const body = JSON.stringify(simple);
    const answer = await rawRequest(proxy.url, head(['Content-Type: application/json', `Content-Length: ${body.length + 100}`]) + body, { untilClosed: true });
    expect(answer.closed).toBe(true);
    if (answer.status !== 0) expectOpenAIError(answer.body, 400, answer.status);
    expect(upstream.requests).toHaveLength(0);
  });

  it('a Content-Length smaller than the body: the cut body is not JSON (400), and the rest is not taken for a request', async () => {
    const body = JSON.stringify(simple);
    const answer = await rawRequest(proxy.url, head(['Content-Type: application/json', `Content-Length: ${body.length - 5}`]) + body, { untilClosed: true });
    // The handler's answer (invalid JSON) or the parser's (the leftover bytes are no request line), whichever is first.
    expect(['invalid_json', 'invalid_request']).toContain(expectOpenAIError(answer.body, 400, answer.status).code);
    expect(answer.closed).toBe(true);
    expect(answer.text.match(/HTTP\/1\.1 5\d\d/)).toBeNull();
    expect(upstream.requests).toHaveLength(0);
  });

  it('both Content-Length and Transfer-Encoding: 400 in OpenAI shape (request smuggling is refused)', async () => {
    const body = JSON.stringify(simple);
    const chunked = `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
    const answer = await rawRequest(
      proxy.url,
      head(['Content-Type: application/json', `Content-Length: ${body.length}`, 'Transfer-Encoding: chunked']) + chunked,
      { untilClosed: true },
    );
    expectOpenAIError(answer.body, 400, answer.status);
    expect(answer.closed).toBe(true);
    expect(upstream.requests).toHaveLength(0);
  });

  it('a header block over 16 KiB: 431 in OpenAI shape', async () => {
    const answer = await rawRequest(proxy.url, head(['Content-Type: application/json', `X-Big: ${'a'.repeat(17 * 1024)}`, 'Content-Length: 2']) + '{}');
    expect(expectOpenAIError(answer.body, 431, answer.status).code).toBe('headers_too_large');
    expect(upstream.requests).toHaveLength(0);
  });
});

describe('content types and JSON', () => {
  it('no Content-Type: read as JSON (DESIGN: some clients omit it), so a bad body is still a 400', async () => {
    const valid = await send(proxy.url + CHAT, { method: 'POST', body: JSON.stringify(simple) });
    expect(valid.status).toBe(200);
    upstream.reset();
    const invalid = await send(proxy.url + CHAT, { method: 'POST', body: 'model=m' });
    expect(expectOpenAIError(invalid.body, 400, invalid.status).code).toBe('invalid_json');
    expect(upstream.requests).toHaveLength(0);
  });

  it('a JSON content type with parameters is JSON; a multipart one is 415', async () => {
    const withCharset = await send(proxy.url + CHAT, { method: 'POST', headers: { 'content-type': 'Application/JSON; charset=utf-8' }, body: JSON.stringify(simple) });
    expect(withCharset.status).toBe(200);
    upstream.reset();
    const multipart = await send(proxy.url + CHAT, { method: 'POST', headers: { 'content-type': 'multipart/form-data; boundary=x' }, body: '--x--' });
    expect(expectOpenAIError(multipart.body, 415, multipart.status).code).toBe('unsupported_media_type');
    expect(upstream.requests).toHaveLength(0);
  });

  const badJson: Array<[string, string]> = [
    ['empty', ''],
    ['whitespace only', ' \n\t '],
    ['truncated', JSON.stringify(simple).slice(0, -3)],
    ['trailing garbage', `${JSON.stringify(simple)}garbage`],
    ['two objects', `${JSON.stringify(simple)} ${JSON.stringify(simple)}`],
    ['a leading UTF-8 BOM (RFC 8259 lets a parser refuse it)', `\uFEFF${JSON.stringify(simple)}`],
    ['a bare string', '"hello"'],
    ['null', 'null'],
  ];
  for (const [name, payload] of badJson) {
    it(`${name}: 400 in OpenAI shape`, async () => {
      const answer = await send(proxy.url + CHAT, { method: 'POST', headers: { 'content-type': 'application/json' }, body: payload });
      expect(['invalid_json', 'invalid_body']).toContain(expectOpenAIError(answer.body, 400, answer.status).code);
      expect(upstream.requests).toHaveLength(0);
    });
  }

  it('__proto__ and constructor.prototype nested deep in a message: 400, and no prototype polluted', async () => {
    const payload = `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x","meta":{"a":{"__proto__":{"polluted":1}}}}]}]}`;
    const answer = await send(proxy.url + CHAT, { method: 'POST', headers: { 'content-type': 'application/json' }, body: payload });
    expect(expectOpenAIError(answer.body, 400, answer.status).code).toBe('invalid_body');
    const viaConstructor = `{"model":"m","messages":[{"role":"user","content":"x","x":[{"constructor":{"prototype":{"polluted":1}}}]}]}`;
    const second = await send(proxy.url + CHAT, { method: 'POST', headers: { 'content-type': 'application/json' }, body: viaConstructor });
    expect(expectOpenAIError(second.body, 400, second.status).code).toBe('invalid_body');
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
    expect(upstream.requests).toHaveLength(0);
  });
});

describe('headers that are not for the next hop', () => {
  const hopHeaders = {
    connection: 'keep-alive, X-Foo, X-Bar',
    'x-foo': 'hop-1',
    'x-bar': 'hop-2',
    te: 'trailers',
    'keep-alive': 'timeout=5',
    'proxy-authorization': 'Basic c2VjcmV0',
    'proxy-connection': 'keep-alive',
    'x-end-to-end': 'kept',
  };
  const removed = ['x-foo', 'x-bar', 'te', 'keep-alive', 'proxy-authorization', 'proxy-connection', 'upgrade', 'expect', 'transfer-encoding'];

  for (const route of [CHAT, '/v1/embeddings']) {
    it(`${route}: Connection-named, TE, Keep-Alive, Proxy-Authorization and Expect: 100-continue are removed, never a 500`, async () => {
      const answer = await send(proxy.url + route, {
        method: 'POST',
        headers: { ...hopHeaders, expect: '100-continue', 'content-type': 'application/json' },
        body: JSON.stringify(simple),
      });
      expect(answer.status).toBeLessThan(500);
      const received = upstream.requests.at(-1)!;
      for (const name of removed) expect(received.headers[name], name).toBeUndefined();
      expect(received.headers['x-end-to-end']).toBe('kept');
      expect(received.json).toEqual(simple);
    });
  }

  it('Connection: Upgrade with Upgrade: websocket is answered as a plain request, the upgrade not passed on', async () => {
    const body = JSON.stringify(simple);
    const answer = await rawRequest(
      proxy.url,
      head(['Connection: Upgrade, X-Foo', 'Upgrade: websocket', 'X-Foo: hop', 'Content-Type: application/json', `Content-Length: ${body.length}`]) + body,
      { end: false, timeoutMs: 2_000 },
    );
    expect(answer.status).toBe(200);
    const received = upstream.requestsTo(CHAT)[0]!;
    expect(received.headers['upgrade']).toBeUndefined();
    expect(received.headers['x-foo']).toBeUndefined();
  });

  it('an Expect the server cannot meet is refused with 417 by Node before any route runs: nothing upstream, never a 500', async () => {
    const body = JSON.stringify(simple);
    const answer = await rawRequest(proxy.url, head(['Expect: teapot', 'Content-Type: application/json', `Content-Length: ${body.length}`]) + body, {
      end: false,
      timeoutMs: 1_000,
    });
    expect(answer.status).toBe(417);
    expect(upstream.requests).toHaveLength(0);
  });

  it('Accept-Encoding: br on the chat route: not forwarded, and the SSE answer is never compressed', async () => {
    const answer = await postJson(proxy.url + CHAT, { ...simple, stream: true }, { headers: { 'accept-encoding': 'br, gzip, deflate' } });
    expect(answer.status).toBe(200);
    expect(answer.headers['content-encoding']).toBeUndefined();
    expect(answer.body.toString()).toContain('data: [DONE]');
    expect(upstream.requestsTo(CHAT)[0]!.headers['accept-encoding']).toBeUndefined();
  });
});

describe('text of every kind', () => {
  // Lone surrogates can only travel as JSON escapes; the others also as raw UTF-8.
  const texts = ['lone high \ud800 and low \udfff', 'NUL \u0000 here', '\ufeffBOM first', 'astral 𝄞 😀 𠜎', 'e\u0301 combining'];

  for (const changed of [false, true]) {
    it(`valid text round-trips exactly to the upstream (${changed ? 're-serialized after a pair repair' : 'raw bytes forwarded'})`, async () => {
      const messages = [
        ...texts.map((content) => ({ role: 'user', content })),
        ...(changed ? [{ role: 'tool', tool_call_id: 'orphan', content: 'dropped' }] : []),
        { role: 'user', content: texts.join(' | ') },
      ];
      const raw = JSON.stringify({ model: 'm', messages });
      const answer = await send(proxy.url + CHAT, { method: 'POST', headers: { 'content-type': 'application/json' }, body: raw });
      expect(answer.status).toBe(200);
      const received = upstream.requestsTo(CHAT)[0]!;
      if (!changed) expect(received.body.toString()).toBe(raw);
      const forwarded = (received.json as { messages: Array<{ content: string }> }).messages.map((message) => message.content);
      expect(forwarded).toEqual([...texts, texts.join(' | ')]);
    });
  }

  it('CRLF CRLF and "data:" inside content: the SSE framing the client sees stays intact', async () => {
    const evil = 'line\r\n\r\ndata: [DONE]\r\n\r\n: comment\n\ndata: {"error":{}}\n\n';
    upstream.script(CHAT, replies.sse(chatStreamEvents({ content: [evil, evil] })));
    const answer = await postJson(proxy.url + CHAT, { ...simple, messages: [{ role: 'user', content: evil }], stream: true });
    const text = answer.body.toString();
    // Then compactor's last comment, with what the server spent (issue 36), standing alone after [DONE].
    expect(text.endsWith(`data: [DONE]\n\n${SERVER_COMMENT}`)).toBe(true);
    const events = parseSse(text.slice(0, -SERVER_COMMENT.length), { dispatchAtEnd: true });
    // Every event is one data line of JSON ended by LF LF, and [DONE] comes once, last.
    expect(events.at(-1)?.raw).toBe('data: [DONE]\n\n');
    for (const event of events.slice(0, -1)) {
      expect(event.raw).toBe(`${event.lines[0]}\n\n`);
      expect(event.lines[0]?.startsWith('data: {')).toBe(true);
      const delta = (JSON.parse(event.data!) as { choices: Array<{ delta?: { content?: string } }> }).choices[0]?.delta;
      if (delta?.content !== undefined && delta.content !== null) expect(delta.content).toBe(evil);
    }
    expect(upstream.requestsTo(CHAT)[0]!.json).toMatchObject({ messages: [{ content: evil }] });
  });
});

describe('huge and deep bodies (compaction on, default body limit)', () => {
  let big: Proxy;
  beforeAll(async () => {
    // A 32k window: 50,000 messages are summarized (prepend mode, in chunks) down to what fits.
    big = await startProxy(upstream, { listen: true, config: { compaction: { enabled: true }, models: { '*': { context_window: 32_000 } } } });
  });
  afterAll(async () => {
    await big.close();
  });

  /**
   * Runs `work` while another client asks `/healthz` one request after
   * another, and counts the answers it got before `work` ended: a process
   * whose loop was held for the whole of `work` answers none. Counted, not
   * timed (a bound on the longest stall, 1 s, failed once on a loaded
   * machine, issue 34).
   */
  async function probedWhile<T>(work: () => Promise<T>): Promise<{ result: T; probes: number }> {
    let done = false;
    let probes = 0;
    const probing = (async () => {
      while (!done) {
        const answer = await send(`${big.url}/healthz`, { method: 'GET' });
        if (!done && answer.status === 200) probes++;
      }
    })();
    try {
      return { result: await work(), probes };
    } finally {
      done = true;
      await probing;
    }
  }

  it('a 50,000-message history is answered, other clients answered meanwhile', async () => {
    const messages = Array.from({ length: 50_000 }, (_, index) => ({ role: index % 2 === 0 ? 'user' : 'assistant', content: `message ${index}` }));
    const body = JSON.stringify({ model: 'm', messages });
    const { result, probes } = await probedWhile(() =>
      send(big.url + CHAT, { method: 'POST', headers: { 'content-type': 'application/json' }, body }),
    );
    expect(result.status).toBe(200);
    expect(upstream.requestsTo(CHAT).length).toBeGreaterThan(1);
    // Its read, plan and summaries take many turns of the loop; /healthz is answered between them.
    expect(probes).toBeGreaterThanOrEqual(3);
  });

  it('10,000 levels of nesting inside a message are answered, not a 500 nor a crash', async () => {
    const deep = `${'['.repeat(10_000)}1${']'.repeat(10_000)}`;
    const deepObject = `${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`;
    for (const [where, value] of [
      ['an unknown field', `{"model":"m","messages":[{"role":"user","content":"x","extra":${deep}}]}`],
      ['content parts', `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x","deep":${deepObject}}]}]}`],
      ['tools', `{"model":"m","tools":${deep},"messages":[{"role":"user","content":"x"}]}`],
      ['a repaired history', `{"model":"m","messages":[{"role":"user","content":"x","extra":${deep}},{"role":"tool","tool_call_id":"orphan","content":"y"}]}`],
    ] as const) {
      const result = await send(big.url + CHAT, { method: 'POST', headers: { 'content-type': 'application/json' }, body: value });
      expect(result.status, where).toBe(400);
      expect(JSON.parse(result.body.toString())).toMatchObject({ error: { code: 'invalid_body', message: 'the request body nests deeper than 512 levels' } });
    }
  });
});
