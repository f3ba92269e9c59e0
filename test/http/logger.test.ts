import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { pino } from 'pino';
import { REDACTED_PATHS, createLogger } from '../../src/http/logger.js';

/** Collects lines, without the time (two loggers never write the same millisecond). */
class Lines {
  readonly lines: string[] = [];
  write(line: string): void {
    this.lines.push(line.replace(/"time":\d+,/, ''));
  }
}

/** pino as configured before primitives skipped the redactor: the reference output. */
function referenceLogger(stream: Lines) {
  return pino({ level: 'trace', redact: { paths: [...REDACTED_PATHS], censor: '[redacted]' } }, stream);
}

const upstreamError = Object.assign(new Error('connect failed', { cause: new Error('inner') }), {
  code: 'ECONNREFUSED',
  headers: { authorization: 'Bearer sk-secret', accept: '*/*' },
  options: { api_key: 'sk-secret' },
});

const cases: Array<[Record<string, unknown>, string]> = [
  [{ method: 'POST', route: 'chat', path: '/v1/chat/completions', status: 200, ms: 0.42, upstreamMs: null, bytes: 702, repairs: 0 }, 'request'],
  [{ error: 'client_closed', aborted: true, ratio: Number.NaN, big: Number.POSITIVE_INFINITY, zero: -0, large: 1e21 }, 'request'],
  [{ text: 'quote " backslash \\ newline \n tab \t nul \u0000 emoji 😀 lone \ud800 end', empty: '' }, 'strings'],
  [{ authorization: 'Bearer sk-secret', cookie: 'a=b', 'x-api-key': 'sk-secret', api_key: 'sk-secret' }, 'top-level credentials'],
  [{ request: { headers: { authorization: 'Bearer sk-secret', cookie: 'a=b', 'x-api-key': 'k' }, api_key: 'sk' } }, 'nested credentials'],
  [{ outer: { inner: { api_key: 'sk-secret' } }, list: [1, 'two', { authorization: 'x' }] }, 'deep credentials'],
  [{ err: upstreamError }, 'an error carrying credentials'],
  [{ config: { auth: { keys: ['sk-1', 'sk-2'] }, upstream: { api_key: 'sk-up' } } }, 'configuration'],
  [{ count: 10n, flag: false, nothing: null, skipped: undefined }, 'odd values'],
];

describe('createLogger', () => {
  it('writes the same lines as pino with the same redaction, credentials redacted', () => {
    const fast = new Lines();
    const reference = new Lines();
    const logger = createLogger({ level: 'trace', stream: fast });
    const expected = referenceLogger(reference);
    for (const [fields, message] of cases) {
      logger.info(fields, message);
      expected.info(fields, message);
      logger.child({ reqId: 'req-1', authorization: 'Bearer sk-child' }).warn(fields, message);
      expected.child({ reqId: 'req-1', authorization: 'Bearer sk-child' }).warn(fields, message);
    }
    logger.info('a message alone');
    expected.info('a message alone');
    expect(fast.lines).toEqual(reference.lines);
    expect(fast.lines.join('')).not.toContain('sk-secret');
    expect(fast.lines.join('')).not.toContain('sk-child');
    expect(fast.lines.join('')).not.toContain('sk-up');
  });

  it('property: any JSON fields come out as the reference writes them', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), fc.string(), (fields, message) => {
        const fast = new Lines();
        const reference = new Lines();
        createLogger({ level: 'info', stream: fast }).info(fields, message);
        referenceLogger(reference).info(fields, message);
        expect(fast.lines).toEqual(reference.lines);
      }),
      { numRuns: 300 },
    );
  });
});
