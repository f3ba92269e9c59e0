import { ProxyError, UpstreamTimeoutError, UpstreamUnreachableError } from '../errors.js';

/**
 * What a failed call to the upstream means: a few words for the log and the
 * client (`connection refused`, naming no address), and the ProxyError a
 * client gets (a timeout 504, an unreachable upstream 502).
 */

const REASONS: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  EPIPE: 'connection reset',
  UND_ERR_SOCKET: 'connection closed',
  UND_ERR_CLOSED: 'connection closed',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host not found',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
};

function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  if ('code' in error && typeof error.code === 'string') return error.code;
  // Happy-eyeballs connects fail with an AggregateError of one error per address.
  if (error instanceof AggregateError) return errorCode(error.errors[0]);
  return undefined;
}

/** A few words on why a call failed (`connection refused`), naming no address. */
export function failureReason(error: unknown): string {
  const code = errorCode(error);
  return (code !== undefined ? REASONS[code] : undefined) ?? 'request failed';
}

/**
 * What a failed undici call means to a client: a timeout (504) or an
 * unreachable upstream (502). Messages name no address.
 */
export function toUpstreamError(error: unknown): ProxyError {
  if (error instanceof ProxyError) return error;
  const code = errorCode(error);
  switch (code) {
    case 'UND_ERR_CONNECT_TIMEOUT':
      return new UpstreamTimeoutError({ phase: 'connect', cause: error });
    case 'UND_ERR_HEADERS_TIMEOUT':
      return new UpstreamTimeoutError({ phase: 'headers', cause: error });
    case 'UND_ERR_BODY_TIMEOUT':
      return new UpstreamTimeoutError({ phase: 'idle', cause: error });
    default:
      return new UpstreamUnreachableError({ reason: failureReason(error), cause: error });
  }
}

// Failures with no answer begun: the connection was refused, reset or closed, or never made.
const NO_ANSWER_CODES = new Set([...Object.keys(REASONS), 'UND_ERR_CONNECT_TIMEOUT']);

/**
 * Whether a failed forward got no answer at all (no status line): the
 * request may be sent to another server of a fleet (issue 39). A headers
 * timeout is not one: the server may be reading the prompt still.
 */
export function failedBeforeAnswer(error: unknown): boolean {
  const cause = error instanceof ProxyError ? error.cause : error;
  const code = errorCode(cause);
  return code !== undefined && NO_ANSWER_CODES.has(code);
}
