import type { FastifyBaseLogger, FastifyError, FastifyInstance } from 'fastify';
import type { Config } from '../config/schema.js';
import { InternalError, LoopDetectedError, PayloadTooLargeError, ShuttingDownError, UnauthorizedError } from '../errors.js';
import { cameThroughHere } from '../upstream/via.js';
import { createKeyCheck } from './auth.js';
import { toProxyError } from './framework-errors.js';
import type { InFlight } from './in-flight.js';
import { sendError } from './request-record.js';
import { discardBoundsFor, discardRestOfBody } from './unread-body.js';

/**
 * What every request goes through before its route: tracked (in-flight.ts),
 * refused when it looped back through compactor, while draining, or without
 * a valid key; and every error a route throws, answered in OpenAI's shape.
 */

export interface RequestHookOptions {
  readonly config: Config;
  readonly inFlight: InFlight;
  readonly retryAfterSeconds: number;
}

export function addRequestHooks(app: FastifyInstance, options: RequestHookOptions): void {
  const { config, inFlight, retryAfterSeconds } = options;
  // An admin key is a key too; it also sees every tenant on the dashboard.
  const allKeys = [...config.auth.keys, ...config.auth.admin_keys];
  const keyCheck = allKeys.length > 0 ? createKeyCheck(allKeys) : undefined;
  // Every looped request gets its 508; the operator is told once what is wrong.
  let loopReported = false;
  const warnLoopOnce = (log: FastifyBaseLogger): void => {
    if (loopReported) return;
    loopReported = true;
    log.warn('a request came back to compactor through its own upstream: upstream.url (or compaction.summary.upstream) points at compactor itself; answering 508');
  };

  // A callback hook, not an async one: no promise per request.
  app.addHook('onRequest', (request, reply, done) => {
    const record = inFlight.track(request, reply);
    if (cameThroughHere(request.headers.via)) {
      warnLoopOnce(request.log);
      return void sendError(reply, new LoopDetectedError());
    }
    if (record.kind === 'ops') return done();
    // Answering here without calling done() ends the request (Fastify's documented way to respond from a hook).
    if (inFlight.draining) return void sendError(reply, new ShuttingDownError(retryAfterSeconds));
    if (keyCheck !== undefined) {
      const result = keyCheck(request.headers.authorization);
      if (!result.ok) return void sendError(reply, new UnauthorizedError());
      record.tenant = result.tenant;
    }
    done();
  });

  const discardBounds = discardBoundsFor(config.limits.body_bytes);
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const proxyError = toProxyError(error, config);
    if (proxyError instanceof InternalError) request.log.error({ err: error }, 'request failed');
    if (proxyError instanceof PayloadTooLargeError) {
      // Fastify asks to close the connection, which resets a client still uploading before it reads the 413:
      // the rest of the body is read and dropped instead (bounded), and the connection stays open.
      reply.removeHeader('connection');
      discardRestOfBody(request.raw, discardBounds);
    }
    return sendError(reply, proxyError);
  });
}
