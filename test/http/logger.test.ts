import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { pino } from 'pino';
import { REDACTED_PATHS, createLogger, prettyLine } from '../../src/http/ops/logger.js';

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

describe('log.format: pretty', () => {
  /** The clock time a line is shown with: local, to the millisecond. */
  const clock = (time: number): string => {
    const date = new Date(time);
    const two = (value: number): string => String(value).padStart(2, '0');
    return `${two(date.getHours())}:${two(date.getMinutes())}:${two(date.getSeconds())}.${String(date.getMilliseconds()).padStart(3, '0')}`;
  };

  it('writes one readable line per event: time, level, message, then the fields', () => {
    const time = Date.UTC(2026, 7, 1, 12, 34, 56, 789);
    const json = JSON.stringify({
      level: 30,
      time,
      pid: 4242,
      hostname: 'box',
      reqId: 'req-1',
      method: 'POST',
      route: 'chat',
      path: '/v1/chat/completions',
      status: 200,
      ms: 812.5,
      upstreamMs: null,
      bytes: 702,
      repairs: 2,
      repairKinds: { orphan: 1, missing: 1 },
      compaction: 'epoch reused (61.2k -> 9.3k tokens); repaired 2 tool pairs',
      msg: 'request',
    });
    expect(prettyLine(`${json}\n`)).toBe(
      `${clock(time)} INFO  request reqId=req-1 method=POST route=chat path=/v1/chat/completions status=200 ms=812.5 upstreamMs=null bytes=702 repairs=2 ` +
        `repairKinds={"orphan":1,"missing":1} compaction="epoch reused (61.2k -> 9.3k tokens); repaired 2 tool pairs"\n`,
    );
  });

  it('keeps an error to its type and message, and escapes what would break the line', () => {
    const time = Date.UTC(2026, 7, 1, 0, 0, 0, 5);
    const json = JSON.stringify({ level: 50, time, err: { type: 'Error', message: 'connect failed', stack: 'Error: connect failed\n    at x' }, reason: 'two\nlines', msg: 'chat request failed' });
    expect(prettyLine(json)).toBe(`${clock(time)} ERROR chat request failed err="Error: connect failed" reason="two\\nlines"\n`);
    // A line pino did not write (or one cut short) passes as it is.
    expect(prettyLine('not json\n')).toBe('not json\n');
  });

  it('is chosen by createLogger, with the same redaction as JSON', () => {
    const lines = new Lines();
    const logger = createLogger({ level: 'info', format: 'pretty', stream: lines });
    logger.info({ route: 'chat', status: 200, headers: { authorization: 'Bearer sk-secret' } }, 'request');
    logger.debug({ hidden: true }, 'below the level');
    expect(lines.lines).toHaveLength(1);
    expect(lines.lines[0]).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO  request route=chat status=200 headers=\{"authorization":"\[redacted\]"\}\n$/);
    expect(lines.lines.join('')).not.toContain('sk-secret');
  });

  it('leaves JSON the default', () => {
    const lines = new Lines();
    createLogger({ level: 'info', stream: lines }).info({ status: 200 }, 'request');
    expect(JSON.parse(lines.lines[0]!)).toMatchObject({ level: 30, status: 200, msg: 'request' });
  });
});
