import type { FastifyReply, FastifyRequest } from 'fastify';
import { pino, type Logger } from 'pino';
import type { RequestRecord } from '../edge/request-record.js';

/**
 * The one line per request: what happened, never what was said or who said
 * it. `status` is the error's when a started answer ended in one
 * (`sentStatus` is then the 200 that went out first); `compaction` is what
 * the `x-compactor` header said (counts and sizes only).
 *
 * The line is written as pino would write it, byte for byte
 * (test/http/request-log.test.ts), but built once as text: handing pino an
 * object made one object with spreads per request, then pino walked it
 * again, key by key, through its redactor (the log line was ~7% of the
 * proxy's CPU, bench/README.md). Every field here is a number, a boolean, a
 * string compactor chose, or the repair kinds (no redacted path can be in
 * them); `prefillMs` / `decodeMs` are the server's own `timings` of the
 * answer, absent when it sent none. When the logger is one this cannot stand in for (a mixin, a log
 * formatter, a write hook, a stream that wants metadata), pino writes the
 * line itself from the same fields.
 */

/** How many of each kind of tool-pair repair (`{ orphan: 1, missing: 1 }`): kinds only, never ids or text. */
function repairKinds(repairs: RequestRecord['pairRepairs']): Record<string, number> {
  const kinds: Record<string, number> = {};
  for (const repair of repairs) kinds[repair.kind] = (kinds[repair.kind] ?? 0) + 1;
  return kinds;
}

function hundredths(ms: number): number {
  return Math.round(ms * 100) / 100;
}

/** A number as pino writes it: JSON, `null` when not finite. */
function numberText(value: number): string {
  return Number.isFinite(value) ? String(value) : 'null';
}

export interface RequestLine {
  readonly method: string;
  readonly route: string;
  readonly path: string;
  readonly status: number;
  readonly sentStatus?: number;
  readonly ms: number;
  readonly upstreamMs: number | null;
  readonly bytes: number;
  readonly repairs: number;
  readonly repairKinds?: Record<string, number>;
  readonly compaction?: string;
  readonly upstream?: string;
  readonly slot?: number;
  readonly slotWaitMs?: number;
  readonly prefillMs?: number;
  readonly decodeMs?: number;
  readonly error?: string;
  readonly aborted?: true;
}

/** The fields of the line, in the line's order (for pino, when it writes the line itself, and for tests). */
export function requestLineFields(request: FastifyRequest, reply: FastifyReply, finished: boolean, totalMs: number): RequestLine {
  const record = request.record;
  const response = reply.raw;
  const queryStart = request.url.indexOf('?');
  return {
    method: request.method,
    route: record.kind,
    path: queryStart === -1 ? request.url : request.url.slice(0, queryStart),
    status: record.errorStatus ?? response.statusCode,
    ...(record.errorStatus === null ? {} : { sentStatus: response.statusCode }),
    ms: hundredths(totalMs),
    upstreamMs: record.upstreamMs === null ? null : hundredths(record.upstreamMs),
    bytes: record.bytes > 0 ? record.bytes : Number(response.getHeader('content-length') ?? 0),
    repairs: record.repairs,
    ...(record.pairRepairs.length === 0 ? {} : { repairKinds: repairKinds(record.pairRepairs) }),
    ...(record.report === null ? {} : { compaction: record.report }),
    ...(record.upstreamServer === null ? {} : { upstream: record.upstreamServer }),
    ...(record.slot === null ? {} : { slot: record.slot, slotWaitMs: hundredths(record.slotWaitMs ?? 0) }),
    ...(record.server === null ? {} : { prefillMs: hundredths(record.server.prefillMs), decodeMs: hundredths(record.server.decodeMs) }),
    ...(record.errorCode === null ? {} : { error: record.errorCode }),
    ...(finished ? {} : { aborted: true as const }),
  };
}

type PinoInternals = Record<symbol, unknown>;
const symbols = pino.symbols;

/** Whether this logger's lines can be written here as pino would write them. */
function writesPlainLines(logger: PinoInternals): boolean {
  const formatters = logger[symbols.formattersSym] as { log?: unknown } | undefined;
  const hooks = logger[symbols.hooksSym] as { streamWrite?: unknown } | undefined;
  const stream = logger[symbols.streamSym] as { write?: unknown; [key: symbol]: unknown } | undefined;
  return (
    typeof logger[symbols.timeSym] === 'function' &&
    typeof logger[symbols.chindingsSym] === 'string' &&
    typeof logger[symbols.endSym] === 'string' &&
    logger[symbols.messageKeySym] === 'msg' &&
    logger[symbols.mixinSym] == null &&
    logger[symbols.nestedKeySym] == null &&
    formatters?.log === undefined &&
    hooks?.streamWrite == null &&
    typeof stream?.write === 'function' &&
    stream[symbols.needsMetadataGsym] !== true
  );
}

/** The line as text, in pino's format; `levelText` is pino's `{"level":30` for the level. */
function lineText(logger: PinoInternals, levelText: string, request: FastifyRequest, reply: FastifyReply, finished: boolean, totalMs: number): string {
  const record = request.record;
  const response = reply.raw;
  const url = request.url;
  const queryStart = url.indexOf('?');
  const sentStatus = response.statusCode;
  let line =
    levelText +
    (logger[symbols.timeSym] as () => string)() +
    (logger[symbols.chindingsSym] as string) +
    ',"method":' +
    JSON.stringify(request.method) +
    ',"route":' +
    JSON.stringify(record.kind) +
    ',"path":' +
    JSON.stringify(queryStart === -1 ? url : url.slice(0, queryStart)) +
    ',"status":' +
    numberText(record.errorStatus ?? sentStatus);
  if (record.errorStatus !== null) line += ',"sentStatus":' + numberText(sentStatus);
  line +=
    ',"ms":' +
    numberText(hundredths(totalMs)) +
    ',"upstreamMs":' +
    (record.upstreamMs === null ? 'null' : numberText(hundredths(record.upstreamMs))) +
    ',"bytes":' +
    numberText(record.bytes > 0 ? record.bytes : Number(response.getHeader('content-length') ?? 0)) +
    ',"repairs":' +
    numberText(record.repairs);
  if (record.pairRepairs.length > 0) line += ',"repairKinds":' + JSON.stringify(repairKinds(record.pairRepairs));
  if (record.report !== null) line += ',"compaction":' + JSON.stringify(record.report);
  if (record.upstreamServer !== null) line += ',"upstream":' + JSON.stringify(record.upstreamServer);
  if (record.slot !== null) line += ',"slot":' + numberText(record.slot) + ',"slotWaitMs":' + numberText(hundredths(record.slotWaitMs ?? 0));
  if (record.server !== null) line += ',"prefillMs":' + numberText(hundredths(record.server.prefillMs)) + ',"decodeMs":' + numberText(hundredths(record.server.decodeMs));
  if (record.errorCode !== null) line += ',"error":' + JSON.stringify(record.errorCode);
  if (!finished) line += ',"aborted":true';
  return line + ',"msg":"request"' + (logger[symbols.endSym] as string);
}

/**
 * Writes the request's line: at `debug` for the ops routes and the
 * dashboard's polls (probes every few seconds, a page polling every 2 s,
 * would drown the rest), at `warn` for a chat request refused or
 * failed after it was read (an upstream's `exceed_context_size_error`, an
 * unreachable upstream: what an operator must see), else `info`.
 */
export function logRequest(request: FastifyRequest, reply: FastifyReply, finished: boolean, totalMs: number): void {
  // Fastify's request logger is a pino child logger (app.ts hands Fastify a pino instance).
  const log = request.log as unknown as Logger;
  const record = request.record;
  const level = record.kind === 'ops' || record.kind === 'dashboard' ? 'debug' : record.chat !== null && (record.errorStatus ?? reply.raw.statusCode) >= 400 ? 'warn' : 'info';
  if (!log.isLevelEnabled(level)) return;
  const internals = log as unknown as PinoInternals;
  const levelText = (internals[symbols.lsCacheSym] as Record<number, string> | undefined)?.[log.levels.values[level] ?? -1];
  if (levelText === undefined || !writesPlainLines(internals)) {
    log[level](requestLineFields(request, reply, finished, totalMs), 'request');
    return;
  }
  (internals[symbols.streamSym] as { write(line: string): void }).write(lineText(internals, levelText, request, reply, finished, totalMs));
}
