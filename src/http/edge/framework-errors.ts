import type { FastifyError } from 'fastify';
import type { Config } from '../../config/schema.js';
import { InternalError, InvalidRequestError, PayloadTooLargeError, ProxyError, UnsupportedMediaTypeError } from '../../errors.js';

/** What Fastify's own errors mean to a client, in compactor's terms (OpenAI's shape, a stable code). */

/** An error thrown in a route or hook, or raised by Fastify while reading the body. */
export function toProxyError(error: FastifyError, config: Config): ProxyError {
  if (error instanceof ProxyError) return error;
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new PayloadTooLargeError(config.limits.body_bytes);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new UnsupportedMediaTypeError('(invalid)');
    default:
      if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
        return new InvalidRequestError({ code: 'invalid_request', message: 'the request could not be read' });
      }
      return new InternalError(error);
  }
}

/** What the router refuses before any hook runs: chiefly a path with a malformed percent-escape (`/%`, `/v1/models%zz`). */
export function frameworkError(error: FastifyError): ProxyError {
  if (error.code === 'FST_ERR_BAD_URL') {
    return new InvalidRequestError({ code: 'invalid_path', message: 'the request path is not a valid URL path: it has a malformed percent-escape' });
  }
  return new InvalidRequestError({ code: 'invalid_request', message: 'the request could not be read' });
}
