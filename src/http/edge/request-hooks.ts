import type { FastifyError, FastifyInstance } from 'fastify';
import type { Config } from '../../config/schema.js';
import { InternalError, LoopDetectedError, PayloadTooLargeError, ShuttingDownError, UnauthorizedError } from '../../errors.js';
import { cameThroughHere } from '../../upstream/via.js';
import { createKeyCheck } from './auth.js';
import { toProxyError } from './framework-errors.js';
import type { InFlight } from './in-flight.js';
import { sendError } from './request-record.js';
import { loopWarner } from '../ops/loop-warnings.js';
import { BodyDrains, discardBoundsFor } from './unread-body.js';

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
  // Every looped request gets its 508; the operator is told once per origin of the loop (loop-warnings.ts).
  const warnLoop = loopWarner();

  // A callback hook, not an async one: no promise per request.
  app.addHook('onRequest', (request, reply, done) => {
    const record = inFlight.track(request, reply);
    if (record.kind === 'ops') return done();
    // Answering here without calling done() ends the request (Fastify's documented way to respond from a hook).
    if (inFlight.draining) return void sendError(reply, new ShuttingDownError(retryAfterSeconds));
    // Before the key check: only this process puts its own mark in a Via (no client knows it), and a
    // self-loop carries upstream.api_key, which need not be among auth.keys. Any other Via is a client's words.
    if (cameThroughHere(request.headers.via)) {
      warnLoop(request, request.log);
      return void sendError(reply, new LoopDetectedError());
    }
    if (keyCheck !== undefined) {
      const result = keyCheck(request.headers.authorization);
      if (!result.ok) return void sendError(reply, new UnauthorizedError());
      record.keyTenant = result.tenant;
    }
    done();
  });

  const drains = new BodyDrains(discardBoundsFor(config.limits.body_bytes, config.limits.drain_min_bytes_per_s), config.limits.max_draining);
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const proxyError = toProxyError(error, config);
    if (proxyError instanceof InternalError) request.log.error({ err: error }, 'request failed');
    if (proxyError instanceof PayloadTooLargeError) {
      // Fastify asks to close the connection, which resets a client still uploading before it reads the 413:
      // the rest of the body is read and dropped instead (bounded), and the connection stays open.
      // Past limits.max_draining drains at once, the 413 closes the connection at once instead.
      if (drains.tryDiscard(request.raw)) reply.removeHeader('connection');
      else {
        reply.header('connection', 'close');
        request.log.info({ draining: drains.draining }, 'oversized body not drained: limits.max_draining drains under way; closing');
      }
    }
    return sendError(reply, proxyError);
  });
}
