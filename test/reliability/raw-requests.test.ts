import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { propertyParameters } from '../transcript/arbitraries.js';
import { FakeUpstream, replies } from '../support/fake-upstream.js';
import { send } from '../support/http-client.js';
import { type MainProcess, startMain } from '../support/main-process.js';
import { rawRequest } from './raw-http.js';

/**
 * Issue 14, "One request kills the process": no request line, whatever its
 * method, path or version, ends compactor. Sent on raw sockets to the real
 * process (`src/main.ts`), so a crash shows as an exit, not as an error the
 * test runner swallows.
 */

let upstream: FakeUpstream;
let main: MainProcess;
let url: string;

beforeAll(async () => {
  upstream = await FakeUpstream.start();
  // Behind a base path, so the dot segments drawn below have something to escape.
  upstream.route('GET', '/llama/v1/models', replies.fixture('v1_models.json'));
  main = startMain(['--host', '127.0.0.1', '--port', '0'], { COMPACTOR_UPSTREAM_URL: `${upstream.url}/llama`, COMPACTOR_CONFIG: '' });
  url = await main.url;
});
afterAll(async () => {
  if (main.child.exitCode === null && main.child.signalCode === null) {
    main.child.kill('SIGKILL');
    await main.exit;
  }
  await upstream.close();
});

// Pieces that have broken servers: bad and overlong percent-escapes, dot segments plain and encoded,
// encoded slashes and NULs, backslashes, a lone `*`, a name past the router's 100-character parameter limit.
const segmentArbitrary = fc.oneof(
  fc.constantFrom('%', '%z', '%zz', '%c0%af', '%e0%80%af', '%ff', '%00', '%2e', '%2e%2e', '%2E.', '..', '.', '%2f', '%5c', '\\', '*', ';', '~', 'v1', 'models', 'chat', 'completions', 'a'.repeat(300)),
  fc.string({ unit: fc.constantFrom(...'az09%./\\?#&=;:@!$\'()*+,~[]{}|^`"<> \t\u007f\u0080\u00ff'.split('')), maxLength: 12 }),
);
const pathArbitrary = fc.oneof(
  { weight: 6, arbitrary: fc.array(segmentArbitrary, { maxLength: 6 }).map((segments) => `/${segments.join('/')}`) },
  { weight: 1, arbitrary: fc.constantFrom('*', '', 'http://127.0.0.1:1/v1/models', 'http://%zz/', '//v1/models', '/v1/chat/completions?%zz') },
);
const methodArbitrary = fc.oneof(
  fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE', 'PROPFIND', 'SEARCH', 'MKCOL', 'QUERY', 'CONNECT'),
  fc.stringMatching(/^[A-Za-z-]{1,10}$/),
);
const versionArbitrary = fc.constantFrom('HTTP/1.1', 'HTTP/1.0', 'HTTP/2.0', 'HTTP/1.1 extra', '');
const bodyArbitrary = fc.constantFrom('', 'Content-Length: 2\r\nContent-Type: application/json\r\n\r\n{}', 'Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n');

describe('hostile request lines', () => {
  it('property: every raw request gets an HTTP answer or a clean close, and the process answers a normal request afterwards', async () => {
    const port = new URL(url).port;
    await fc.assert(
      fc.asyncProperty(methodArbitrary, pathArbitrary, versionArbitrary, bodyArbitrary, async (method, path, version, body) => {
        const headers = `Host: 127.0.0.1:${port}\r\nConnection: close\r\n`;
        const request = `${method} ${path} ${version}\r\n${headers}${body === '' ? '\r\n' : body}`;
        const answer = await rawRequest(url, Buffer.from(request, 'latin1'), { end: false, timeoutMs: 5_000 });
        expect(answer.status !== 0 || answer.closed, `no answer and no close for ${JSON.stringify(request)}`).toBe(true);
        // compactor's own 500 is a bug; a 5xx of the upstream double would pass through unchanged.
        expect(answer.status, JSON.stringify(request)).not.toBe(500);
        expect(main.child.exitCode, main.output()).toBeNull();
      }),
      propertyParameters,
    );
    expect((await send(`${url}/v1/models`)).status).toBe(200);
    expect(main.child.exitCode).toBeNull();
  }, 120_000);

  for (const path of ['/%', '/v1/models%zz', '/%c0%af']) {
    it(`GET ${path}: 400 in OpenAI's shape naming the path, and the process lives on`, async () => {
      const answer = await rawRequest(url, `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`, { end: false });
      expect(answer.status).toBe(400);
      const error = (JSON.parse(answer.body) as { error: Record<string, unknown> }).error;
      expect(Object.keys(error).sort()).toEqual(['code', 'message', 'param', 'type']);
      expect(error['type']).toBe('invalid_request_error');
      expect(error['message']).toMatch(/path/);
      expect((await send(`${url}/v1/models`)).status).toBe(200);
      expect(main.child.exitCode).toBeNull();
    });
  }
});
