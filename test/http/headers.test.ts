import { describe, expect, it } from 'vitest';
import { bearerToken, createKeyCheck } from '../../src/http/edge/auth.js';
import { forwardRequestHeaders, forwardResponseHeaders, isContentEncoded } from '../../src/http/edge/headers.js';
import { mediaTypeOf } from '../../src/upstream/media-type.js';
import { targetPath } from '../../src/http/edge/request-record.js';
import { viaWithOwn } from '../../src/upstream/via.js';

// Every forwarded request carries compactor's own Via entry (loop detection, issue 12 item 6).
const via = viaWithOwn(undefined);

describe('forwardRequestHeaders', () => {
  it('removes hop-by-hop headers, those named in Connection, and the ones compactor sets itself', () => {
    expect(
      forwardRequestHeaders({
        host: 'proxy',
        connection: 'keep-alive, X-Named',
        'x-named': '1',
        'keep-alive': 'timeout=5',
        'proxy-authorization': 'Basic a',
        te: 'trailers',
        trailer: 'x',
        'transfer-encoding': 'chunked',
        upgrade: 'websocket',
        expect: '100-continue',
        'content-length': '10',
        accept: '*/*',
        authorization: 'Bearer client',
      }),
    ).toEqual({ accept: '*/*', authorization: 'Bearer client', via });
  });

  it('reads a bare Connection: keep-alive or close as any other list (a header named close is dropped)', () => {
    expect(forwardRequestHeaders({ connection: 'Keep-Alive', 'keep-alive': 'timeout=5', accept: '*/*' })).toEqual({ accept: '*/*', via });
    expect(forwardRequestHeaders({ connection: 'CLOSE', close: 'x', accept: '*/*' })).toEqual({ accept: '*/*', via });
    expect(forwardRequestHeaders({ connection: 'x-named', 'x-named': '1', accept: '*/*' })).toEqual({ accept: '*/*', via });
  });

  it('replaces Authorization with the upstream key, drops Accept-Encoding when asked, keeps Content-Length when asked', () => {
    const headers = { authorization: 'Bearer client', 'accept-encoding': 'gzip', 'content-length': '3' };
    expect(forwardRequestHeaders(headers, { apiKey: 'k', dropAcceptEncoding: true })).toEqual({ authorization: 'Bearer k', via });
    expect(forwardRequestHeaders(headers, { keepContentLength: true })).toEqual({ ...headers, via });
    expect(forwardRequestHeaders({ via: '1.1 nginx' }).via).toBe(`1.1 nginx, ${via}`);
  });
});

describe('forwardResponseHeaders', () => {
  it('removes hop-by-hop headers and those named in Connection, keeps the rest (arrays too)', () => {
    expect(
      forwardResponseHeaders({
        connection: 'close, x-hop',
        'x-hop': '1',
        'keep-alive': 'timeout=5',
        'transfer-encoding': 'chunked',
        'proxy-authenticate': 'Basic',
        'set-cookie': ['a=1', 'b=2'],
        'content-length': '15',
        'retry-after': '7',
      }),
    ).toEqual({ 'set-cookie': ['a=1', 'b=2'], 'content-length': '15', 'retry-after': '7' });
  });
});

describe('small helpers', () => {
  it('mediaTypeOf', () => {
    expect(mediaTypeOf('Application/JSON; charset=utf-8')).toBe('application/json');
    expect(mediaTypeOf(undefined)).toBe('');
  });

  it('isContentEncoded', () => {
    expect(isContentEncoded('gzip')).toBe(true);
    expect(isContentEncoded(['identity', 'br'])).toBe(true);
    expect(isContentEncoded(' Identity ')).toBe(false);
    expect(isContentEncoded('')).toBe(false);
    expect(isContentEncoded(undefined)).toBe(false);
  });

  it('targetPath keeps only the path of an absolute-form target', () => {
    expect(targetPath('/v1/models?x=1')).toBe('/v1/models?x=1');
    expect(targetPath('http://evil.example/steal?x=1')).toBe('/steal?x=1');
    expect(targetPath('*')).toBe('/');
  });
});

describe('createKeyCheck', () => {
  const check = createKeyCheck(['sk-one', 'sk-two']);

  it('accepts exactly the configured Bearer keys', () => {
    expect(check('Bearer sk-one')).toMatchObject({ ok: true });
    expect(check('bearer  sk-two ')).toMatchObject({ ok: true });
    for (const header of [undefined, '', 'Bearer', 'Bearer sk-on', 'Bearer sk-one2', 'Basic sk-one', 'sk-one', 'Bearer sk-one sk-two']) {
      expect(check(header), String(header)).toEqual({ ok: false });
    }
  });

  it('gives each key its own stable tenant, never the key itself', () => {
    const one = check('Bearer sk-one');
    const two = check('Bearer sk-two');
    expect(one.ok && two.ok && one.tenant !== two.tenant).toBe(true);
    expect(one).toEqual(check('Bearer sk-one'));
    expect(JSON.stringify(one)).not.toContain('sk-one');
  });

  it('bearerToken', () => {
    expect(bearerToken('Bearer abc')).toBe('abc');
    expect(bearerToken('Token abc')).toBeUndefined();
  });
});
