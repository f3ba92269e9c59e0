import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { HeaderRecord } from '../../upstream/client.js';
import { viaWithOwn } from '../../upstream/via.js';
import { REQUEST_MODE_HEADER } from '../exchange/request-mode.js';

/**
 * Header handling of a reverse proxy (RFC 9110 §7.6.1): hop-by-hop headers
 * describe one connection, so they are removed in both directions, along
 * with every header the `Connection` header names.
 */

const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection', // not standard, but sent by old clients; never meant for the next hop
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/**
 * Request headers that compactor sets itself: `host` (the upstream is fixed by
 * configuration), `expect` (Node answers `100-continue` itself and undici
 * refuses the header), `content-length` (undici sets it from the body).
 */
const REQUEST_ONLY: ReadonlySet<string> = new Set(['host', 'expect', 'content-length']);

/** Headers addressed to compactor itself: a server behind it has no use for them (issue 34 item 3: the mode header was forwarded). */
const COMPACTOR_ONLY: ReadonlySet<string> = new Set([REQUEST_MODE_HEADER]);

const CLOSE_ONLY: ReadonlySet<string> = new Set(['close']);

/**
 * Lower-cased header names listed in a `Connection` header value. Nearly
 * every request says just `keep-alive` (already hop-by-hop: nothing more to
 * drop) or `close`: those take no Set, split or array per request (1% of
 * the proxy's CPU under load, bench/README.md).
 */
function connectionTokens(value: string | string[] | undefined): ReadonlySet<string> | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'string') {
    const lower = value.length <= 10 ? value.toLowerCase() : '';
    if (lower === 'keep-alive') return undefined;
    if (lower === 'close') return CLOSE_ONLY;
  }
  const tokens = new Set<string>();
  for (const part of Array.isArray(value) ? value : [value]) {
    for (const token of part.split(',')) {
      const name = token.trim().toLowerCase();
      if (name !== '') tokens.add(name);
    }
  }
  return tokens;
}

export interface ForwardRequestHeadersOptions {
  /** Replaces the client's `Authorization` (the configured `upstream.api_key`). */
  readonly apiKey?: string | null;
  /** The chat route reads the answer (usage tap), so it asks for it uncompressed. */
  readonly dropAcceptEncoding?: boolean;
  /** Keep the client's `content-length`: the body is its own stream, passed as it is. */
  readonly keepContentLength?: boolean;
}

/**
 * The headers sent upstream for a client's request.
 *
 * @example
 * forwardRequestHeaders({ host: 'proxy', connection: 'x-a', 'x-a': '1', accept: '*\/*' })
 * // → { accept: '*\/*' }
 */
export function forwardRequestHeaders(headers: IncomingHttpHeaders, options: ForwardRequestHeadersOptions = {}): HeaderRecord {
  const { apiKey = null, dropAcceptEncoding = false, keepContentLength = false } = options;
  const named = connectionTokens(headers.connection);
  const forwarded: HeaderRecord = {};
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined) continue;
    if (HOP_BY_HOP.has(name) || named?.has(name) === true) continue;
    if (REQUEST_ONLY.has(name) && !(keepContentLength && name === 'content-length')) continue;
    if (dropAcceptEncoding && name === 'accept-encoding') continue;
    if (COMPACTOR_ONLY.has(name)) continue;
    forwarded[name] = value;
  }
  if (apiKey !== null) forwarded['authorization'] = `Bearer ${apiKey}`;
  forwarded['via'] = viaWithOwn(headers.via);
  return forwarded;
}

/**
 * The upstream's response headers as they go to the client.
 *
 * @example
 * forwardResponseHeaders({ 'content-type': 'application/json', 'keep-alive': 'timeout=5' })
 * // → { 'content-type': 'application/json' }
 */
export function forwardResponseHeaders(headers: Readonly<Record<string, string | string[] | undefined>>): OutgoingHttpHeaders {
  const named = connectionTokens(headers['connection']);
  const forwarded: OutgoingHttpHeaders = {};
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined) continue;
    if (HOP_BY_HOP.has(name) || named?.has(name) === true) continue;
    forwarded[name] = value;
  }
  return forwarded;
}

/**
 * Whether a body is encoded (`Content-Encoding: gzip`, `br`, …): its bytes
 * are not the text they carry.
 *
 * @example
 * isContentEncoded('gzip') // → true
 * isContentEncoded('identity') // → false
 */
export function isContentEncoded(value: string | string[] | undefined): boolean {
  const text = (Array.isArray(value) ? value.join(',') : (value ?? '')).trim().toLowerCase();
  return text !== '' && text !== 'identity';
}

/** Added to SSE answers so no cache or buffering proxy (nginx) holds tokens back. */
export const SSE_RESPONSE_HEADERS: Readonly<Record<string, string>> = {
  'cache-control': 'no-cache',
  'x-accel-buffering': 'no',
};

/** A header value as ASCII on one line: every control or non-ASCII character becomes `?` (same length). */
export function headerText(text: string): string {
  return text.replace(/[^\x20-\x7e]/g, '?');
}
