import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { type FakeUpstream, replies } from '../support/fake-upstream.js';
import { send } from '../support/http-client.js';
import { type Proxy, sharedForSuite } from '../support/proxy.js';

let upstream: FakeUpstream;
let proxy: Proxy;

sharedForSuite({ listen: true }, (started) => {
  ({ upstream, proxy } = started);
});
afterEach(() => {
  upstream.reset();
});

describe('pass-through', () => {
  const routes: Array<{ method: string; path: string; body?: string }> = [
    { method: 'GET', path: '/v1/models' },
    { method: 'GET', path: '/props' },
    { method: 'GET', path: '/health' },
    { method: 'GET', path: '/slots' },
    // (GET /metrics is compactor's own: test/http/metrics.test.ts.)
    { method: 'GET', path: '/v1/nope' },
    { method: 'POST', path: '/tokenize', body: '{\n "content": "hello world"\n}' },
    { method: 'POST', path: '/apply-template', body: '{"messages":[{"role":"user","content":"Say hi."}]}' },
  ];

  for (const route of routes) {
    it(`${route.method} ${route.path} answers byte for byte what the upstream answers directly`, async () => {
      const options = { method: route.method, ...(route.body === undefined ? {} : { body: route.body, headers: { 'content-type': 'application/json' } }) };
      const direct = await send(upstream.url + route.path, options);
      const proxied = await send(proxy.url + route.path, options);
      expect(proxied.status).toBe(direct.status);
      expect(proxied.body.equals(direct.body)).toBe(true);
      expect(proxied.headers['content-type']).toBe(direct.headers['content-type']);
      expect(proxied.ending).toBe('ended');
      if (route.body !== undefined) {
        const [first, second] = upstream.requestsTo(route.path);
        expect(second?.body.equals(first!.body)).toBe(true);
      }
    });
  }

  it('streams any method, path and query, with the request body untouched', async () => {
    const body = Buffer.from(JSON.stringify({ input: ['αβγ', 'x'.repeat(100_000)], model: 'e' }));
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
      upstream.script('/v1/embeddings', replies.json(200, { method }));
      const headers = { 'content-type': 'application/json', 'content-length': String(body.length) };
      const answer = await send(`${proxy.url}/v1/embeddings?a=1&b=%20`, { method, body, headers });
      expect(answer.status).toBe(200);
      expect(JSON.parse(answer.body.toString())).toEqual({ method });
    }
    const received = upstream.requestsTo('/v1/embeddings');
    expect(received.map((item) => item.method)).toEqual(['POST', 'PUT', 'PATCH', 'DELETE']);
    for (const item of received) {
      expect(item.path).toBe('/v1/embeddings?a=1&b=%20');
      expect(item.body.equals(body)).toBe(true);
    }
    upstream.route('HEAD', '/health', ({ response }) => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': '15' });
      response.end();
    });
    const head = await send(`${proxy.url}/health`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers['content-length']).toBe('15');
    expect(head.ending).toBe('ended');
    expect(upstream.requests.at(-1)?.method).toBe('HEAD');
  });

  it('passes methods Fastify does not know by default (WebDAV PROPFIND, SEARCH, MKCOL; QUERY) on like any other, body included', async () => {
    const body = '<?xml version="1.0"?><propfind xmlns="DAV:"><allprop/></propfind>';
    for (const method of ['PROPFIND', 'SEARCH', 'MKCOL', 'QUERY', 'UNLOCK']) {
      upstream.route(method, '/dav/x', replies.json(207, { method }));
      const answer = await send(`${proxy.url}/dav/x`, { method, body, headers: { 'content-type': 'application/xml' } });
      expect(answer.status, method).toBe(207);
      expect(JSON.parse(answer.body.toString())).toEqual({ method });
    }
    expect(upstream.requestsTo('/dav/x').map((item) => [item.method, item.body.toString()])).toEqual(
      ['PROPFIND', 'SEARCH', 'MKCOL', 'QUERY', 'UNLOCK'].map((method) => [method, body]),
    );
  });

  it('streams a chunked request body on', async () => {
    const answer = await new Promise<number>((resolve, reject) => {
      const outgoing = request(`${proxy.url}/upload`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, agent: false }, (response) => {
        response.resume();
        response.once('end', () => resolve(response.statusCode ?? 0));
      });
      outgoing.once('error', reject);
      outgoing.write('part one, ');
      setTimeout(() => outgoing.end('part two'), 20);
    });
    expect(answer).toBe(404);
    expect(upstream.requestsTo('/upload')[0]?.body.toString()).toBe('part one, part two');
  });

  it('removes hop-by-hop headers both ways', async () => {
    upstream.script('/v1/models', ({ response }) => {
      response.setHeader('connection', 'close, x-upstream-hop');
      response.setHeader('x-upstream-hop', '1');
      response.setHeader('proxy-authenticate', 'Basic');
      response.setHeader('x-kept', 'yes');
      response.end('{}');
    });
    const answer = await send(`${proxy.url}/v1/models`, {
      headers: { connection: 'x-client-hop', 'x-client-hop': '1', 'proxy-authorization': 'Basic abc', te: 'trailers', 'x-client-kept': 'yes' },
    });
    expect(answer.headers['x-upstream-hop']).toBeUndefined();
    expect(answer.headers['proxy-authenticate']).toBeUndefined();
    expect(answer.headers['x-kept']).toBe('yes');
    const received = upstream.requestsTo('/v1/models')[0]!.headers;
    expect(received['x-client-hop']).toBeUndefined();
    expect(received['proxy-authorization']).toBeUndefined();
    expect(received['te']).toBeUndefined();
    expect(received['x-client-kept']).toBe('yes');
  });

  it('an absolute-form request target cannot choose the host', async () => {
    const answer = await new Promise<number>((resolve, reject) => {
      const outgoing = request({ host: '127.0.0.1', port: new URL(proxy.url).port, path: 'http://169.254.169.254/latest/meta-data', agent: false }, (response) => {
        response.resume();
        response.once('end', () => resolve(response.statusCode ?? 0));
      });
      outgoing.once('error', reject);
      outgoing.end();
    });
    expect(answer).toBe(404);
    expect(upstream.requests.at(-1)?.path).toBe('/latest/meta-data');
  });

  it('a client that leaves aborts the upstream request', async () => {
    upstream.script('/completion', replies.stall({ eventsBefore: 1 }));
    const outgoing = request(`${proxy.url}/completion`, { method: 'POST', agent: false, headers: { 'content-type': 'application/json' } });
    outgoing.on('error', () => undefined);
    outgoing.on('response', (response) => response.once('data', () => outgoing.destroy()));
    outgoing.end('{"prompt":"x","stream":true}');
    await upstream.waitFor(() => upstream.requestsTo('/completion')[0]?.abortedAt != null, { what: 'the abort' });
  });

  it('an upstream that breaks mid-body breaks the client connection', async () => {
    upstream.script('/v1/models', replies.resetMidStream({ eventsBefore: 2 }));
    const answer = await send(`${proxy.url}/v1/models`);
    expect(answer.ending).toBe('broken');
  });

  it('502 in OpenAI shape when the upstream cannot be reached', async () => {
    upstream.refuseConnections();
    const answer = await send(`${proxy.url}/v1/models`);
    expect(answer.status).toBe(502);
    expect(JSON.parse(answer.body.toString())).toMatchObject({ error: { code: 'upstream_unreachable', type: 'server_error' } });
  });
});
