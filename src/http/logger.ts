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

export function createLogger(options: LoggerOptions): Logger {
  const { level, stream } = options;
  const settings = { level, redact: { paths: [...REDACTED_PATHS], censor: '[redacted]' } };
  return stream === undefined ? pino(settings) : pino(settings, stream);
}
