import { pino, type DestinationStream, type Logger } from 'pino';
import { stdoutLines } from './stdout-lines.js';

/**
 * Paths redacted at every level. compactor never logs headers or bodies on
 * purpose; this catches the accidents (a debug line with `headers`, an error
 * carrying its request options).
 */
export const REDACTED_PATHS: readonly string[] = [
  'authorization',
  'cookie',
  '["x-api-key"]',
  'api_key',
  'headers.authorization',
  'headers.cookie',
  'headers["x-api-key"]',
  '*.authorization',
  '*.cookie',
  '*["x-api-key"]',
  '*.api_key',
  '*.headers.authorization',
  '*.headers.cookie',
  '*.headers["x-api-key"]',
  '*.*.api_key',
  'config.auth.keys',
];

/** `json`: one JSON object per line, for machines (the default); `pretty`: one readable line per event, for a person at a terminal. */
export type LogFormat = 'json' | 'pretty';

export interface LoggerOptions {
  readonly level: string;
  /** `json` when absent. */
  readonly format?: LogFormat;
  /** Where lines go; stdout when absent. Tests pass a stream to read them. */
  readonly stream?: DestinationStream;
}

export function createLogger(options: LoggerOptions): Logger {
  const { level, format = 'json', stream } = options;
  const settings = { level, redact: { paths: [...REDACTED_PATHS], censor: '[redacted]' } };
  // The lines still gathered are written when the process exits, wrapped or not (stdout-lines.ts).
  const destination = stream ?? stdoutLines();
  // The pretty lines are made from pino's JSON ones, after redaction: the same fields, shown another way.
  const logger = pino(settings, format === 'pretty' ? { write: (line: string) => destination.write(prettyLine(line)) } : destination);
  serializePrimitivesDirectly(logger);
  return logger;
}

type Stringifier = (value: unknown, stringifySafe?: unknown) => string | undefined;

/**
 * pino runs a redaction path that starts with `*` on every value of every
 * line, primitives included, and its redactor clones and walks the value on
 * each call: some 6 µs for the ten fields of a request line, a fifth of the
 * proxy's CPU under load (bench/README.md). A string, number or boolean holds
 * no path, so its redaction is its JSON text; objects still go through the
 * redactor. Lines stay byte for byte the same (test/http/logger.test.ts).
 * Children share the parent's stringifiers, so they get it too.
 */
function serializePrimitivesDirectly(logger: Logger): void {
  const stringifiers = (logger as unknown as Record<symbol, Record<symbol, Stringifier> | undefined>)[pino.symbols.stringifiersSym];
  const redactAll = stringifiers?.[pino.symbols.wildcardFirstSym];
  if (stringifiers === undefined || redactAll === undefined) return;
  stringifiers[pino.symbols.wildcardFirstSym] = (value, stringifySafe) => {
    const type = typeof value;
    return type === 'string' || type === 'number' || type === 'boolean' ? JSON.stringify(value) : redactAll(value, stringifySafe);
  };
}

const LEVEL_NAMES: Readonly<Record<number, string>> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };

/** What every line has and the pretty line shows in front (time, level, message) or not at all (pid, hostname). */
const SHOWN_IN_FRONT = new Set(['level', 'time', 'pid', 'hostname', 'msg']);

const BARE_VALUE = /^[^\s"=\\]+$/;

function two(value: number): string {
  return String(value).padStart(2, '0');
}

/** `12:34:56.789`, local time: a person at a terminal knows the date. */
function clockTime(time: unknown): string {
  const date = typeof time === 'number' ? new Date(time) : new Date();
  return `${two(date.getHours())}:${two(date.getMinutes())}:${two(date.getSeconds())}.${String(date.getMilliseconds()).padStart(3, '0')}`;
}

/** A field's value on the line: bare when it cannot be misread, else as JSON (quoted, escaped, on one line). */
function shown(key: string, value: unknown): string {
  if (key === 'err' && typeof value === 'object' && value !== null && 'message' in value) {
    const error = value as { type?: unknown; message?: unknown };
    return JSON.stringify(`${typeof error.type === 'string' ? error.type : 'Error'}: ${String(error.message)}`);
  }
  if (typeof value === 'string') return BARE_VALUE.test(value) ? value : JSON.stringify(value);
  return JSON.stringify(value) ?? String(value);
}

/**
 * One of pino's JSON lines as a person reads it at a terminal:
 * `12:34:56.789 INFO  request method=POST route=chat status=200 ms=812.5`.
 * The fields are those of the JSON line, in its order, so nothing is shown
 * that the JSON line would not hold; an error shows its type and message
 * (its stack is in the JSON format). A line that is not JSON passes as it is.
 *
 * @example
 * prettyLine('{"level":40,"time":0,"pid":1,"hostname":"h","model":"m","msg":"summary failed"}\n')
 * // → '01:00:00.000 WARN  summary failed model=m\n' (in a UTC+1 zone)
 */
export function prettyLine(line: string): string {
  let entry: unknown;
  try {
    entry = JSON.parse(line);
  } catch {
    return line;
  }
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) return line;
  const fields = entry as Record<string, unknown>;
  const level = typeof fields['level'] === 'number' ? (LEVEL_NAMES[fields['level']] ?? `L${fields['level']}`) : 'INFO';
  const message = typeof fields['msg'] === 'string' ? fields['msg'].replace(/\r?\n/g, '\\n') : '';
  let text = `${clockTime(fields['time'])} ${level.padEnd(5)} ${message}`;
  for (const [key, value] of Object.entries(fields)) {
    if (SHOWN_IN_FRONT.has(key)) continue;
    text += ` ${key}=${shown(key, value)}`;
  }
  return `${text}\n`;
}
