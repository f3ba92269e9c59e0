import type { ProxyError } from '../../errors.js';

/**
 * compactor's own errors in the Anthropic Messages API's shape
 * (`{"type":"error","error":{"type","message"}}`), with the status it goes
 * with: what `@anthropic-ai/sdk` and Claude Code read. An upstream's own
 * error body in that shape is passed on as it came.
 */

/** Anthropic's error type for an HTTP status (docs.anthropic.com, "Errors"). */
export function anthropicErrorType(status: number): string {
  switch (status) {
    case 400:
    case 415:
      return 'invalid_request_error';
    case 401:
      return 'authentication_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 413:
      return 'request_too_large';
    case 429:
      return 'rate_limit_error';
    case 503:
    case 529:
      return 'overloaded_error';
    default:
      return status >= 400 && status < 500 ? 'invalid_request_error' : 'api_error';
  }
}

export function anthropicErrorBody(error: ProxyError): unknown {
  const upstream = (error as { upstreamBody?: unknown }).upstreamBody;
  if (typeof upstream === 'object' && upstream !== null && (upstream as { type?: unknown }).type === 'error') return upstream;
  return { type: 'error', error: { type: anthropicErrorType(error.status), message: error.message } };
}

/** The error as a streamed event: `event: error` and its data, as Anthropic ends a failed stream. */
export function anthropicErrorEvent(error: ProxyError): string {
  return `event: error\ndata: ${JSON.stringify(anthropicErrorBody(error))}\n\n`;
}
