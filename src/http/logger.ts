import { pino, type DestinationStream, type Logger } from 'pino';

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

export interface LoggerOptions {
  readonly level: string;
  /** Where lines go; stdout when absent. Tests pass a stream to read them. */
  readonly stream?: DestinationStream;
}

/**
 * Lines to stdout are gathered up to this many bytes (some 15 request lines)
 * and written together, and at the latest every {@link STDOUT_FLUSH_MS}: each
 * asynchronous write is a round trip through libuv's thread pool, some 13 µs
 * of CPU on the proxy's core. pino writes what is left synchronously when the
 * process exits.
 */
const STDOUT_BATCH_BYTES = 4096;
const STDOUT_FLUSH_MS = 200;

export function createLogger(options: LoggerOptions): Logger {
  const { level, stream } = options;
  const settings = { level, redact: { paths: [...REDACTED_PATHS], censor: '[redacted]' } };
  const destination = stream ?? pino.destination({ dest: 1, sync: false, minLength: STDOUT_BATCH_BYTES, periodicFlush: STDOUT_FLUSH_MS });
  const logger = pino(settings, destination);
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
