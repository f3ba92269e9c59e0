import { describe, expect, it } from 'vitest';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { createLogger } from '../../src/http/ops/logger.js';
import { type RequestRecord, blankRecord } from '../../src/http/edge/request-record.js';
import { logRequest, requestLineFields } from '../../src/http/ops/request-log.js';

/** Collects lines, without the time (two writes never share a millisecond). */
class Lines {
  readonly lines: string[] = [];
  write(line: string): void {
    this.lines.push(line.replace(/"time":\d+,/, ''));
  }
}

function record(fields: Partial<RequestRecord>): RequestRecord {
  return { ...blankRecord('chat', 0), upstreamMs: 12.3456, ...fields };
}

function exchange(log: Logger, url: string, fields: Partial<RequestRecord>, statusCode = 200, contentLength?: string) {
  const request = { log, method: 'POST', url, record: record(fields) } as unknown as FastifyRequest;
  const reply = { raw: { statusCode, getHeader: (name: string) => (name === 'content-length' ? contentLength : undefined) } } as unknown as FastifyReply;
  return { request, reply };
}

const cases: Array<[string, Partial<RequestRecord>, number, string | undefined, boolean, number]> = [
  ['/v1/chat/completions', {}, 200, '702', true, 0.4242],
  ['/v1/chat/completions?x="quoted"', { bytes: 5120, upstreamMs: null, errorCode: 'client_closed' }, 200, undefined, false, 1234.5678],
  ['/chat/completions', { errorStatus: 502, errorCode: 'upstream_stream_failed', report: 'summarized 84 messages -> 2 (9000 -> 700 tokens)' }, 200, undefined, true, 3],
  ['/v1/chat/completions', { repairs: 3, pairRepairs: [{ kind: 'orphan' }, { kind: 'missing' }, { kind: 'orphan' }] as unknown as RequestRecord['pairRepairs'] }, 200, 'not a number', true, 7],
  ['/v1/chat/completions', { slot: 3, slotWaitMs: 12.3456 }, 200, '702', true, 5],
  ['/v1/chat/completions', { upstreamServer: 'http://gpu-2:8080/', slot: 1, slotWaitMs: 0 }, 200, '702', true, 5],
  ['/v1/models', { kind: 'passthrough', upstreamMs: Number.NaN }, 404, '19', true, Number.POSITIVE_INFINITY],
  ['/weird/\u00e9\n"path"\\', { kind: 'passthrough', report: 'caf\u00e9 \u2192 ok' }, 500, '0', true, 1],
];

describe('logRequest', () => {
  it.each(cases)('writes %s as pino writes the same fields, byte for byte', (url, fields, status, length, finished, totalMs) => {
    const written = new Lines();
    const reference = new Lines();
    const direct = createLogger({ level: 'info', stream: written }).child({ reqId: 'req-1' });
    const viaPino = createLogger({ level: 'info', stream: reference }).child({ reqId: 'req-1' });
    const mine = exchange(direct, url, fields, status, length);
    logRequest(mine.request, mine.reply, finished, totalMs);
    const theirs = exchange(viaPino, url, fields, status, length);
    viaPino.info(requestLineFields(theirs.request, theirs.reply, finished, totalMs), 'request');
    expect(written.lines).toHaveLength(1);
    expect(written.lines).toEqual(reference.lines);
  });

  it('writes ops requests at debug only, and nothing below the level', () => {
    const lines = new Lines();
    const logger = createLogger({ level: 'info', stream: lines });
    const probe = exchange(logger, '/healthz', { kind: 'ops' });
    logRequest(probe.request, probe.reply, true, 1);
    expect(lines.lines).toEqual([]);
    const debugLines = new Lines();
    const debug = exchange(createLogger({ level: 'debug', stream: debugLines }), '/healthz', { kind: 'ops' });
    logRequest(debug.request, debug.reply, true, 1);
    expect(debugLines.lines).toHaveLength(1);
    expect(JSON.parse(debugLines.lines[0]!)).toMatchObject({ level: 20, route: 'ops', path: '/healthz', msg: 'request' });
  });

  it("issue 37: the dashboard's polls of /dashboard/state are written at debug, not at info every 2 s", () => {
    const lines = new Lines();
    const poll = exchange(createLogger({ level: 'info', stream: lines }), '/dashboard/state', { kind: 'dashboard' });
    logRequest(poll.request, poll.reply, true, 1);
    expect(lines.lines).toEqual([]);
    const debugLines = new Lines();
    const debug = exchange(createLogger({ level: 'debug', stream: debugLines }), '/dashboard/state', { kind: 'dashboard' });
    logRequest(debug.request, debug.reply, true, 1);
    expect(JSON.parse(debugLines.lines[0]!)).toMatchObject({ level: 20, route: 'dashboard', path: '/dashboard/state' });
  });

  it('gives a pretty logger the same line, shown its way', () => {
    const lines = new Lines();
    const pretty = exchange(createLogger({ level: 'info', format: 'pretty', stream: lines }), '/v1/models', { kind: 'passthrough' });
    logRequest(pretty.request, pretty.reply, true, 1.5);
    expect(lines.lines).toHaveLength(1);
    expect(lines.lines[0]).toMatch(/ INFO  request method=POST route=passthrough path=\/v1\/models status=200 ms=1\.5 /);
  });
});
