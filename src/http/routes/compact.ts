import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { MethodNotAllowedError } from '../../errors.js';
import { type CompactRouteOptions, runCompaction } from '../exchange/compact-history.js';
import { sendError } from '../edge/request-record.js';
import { receiveBodies } from '../edge/body-receiver.js';
import { COMPACT_BODY_FORMAT } from '../../formats/registry.js';

/** `POST /v1/compact` (and `/compact`): registration only; the request is src/http/exchange/compact-history.ts's. */

export type { CompactRouteOptions } from '../exchange/compact-history.js';

export async function compactRoutes(app: FastifyInstance, options: CompactRouteOptions): Promise<void> {
  const bodyLimit = options.config.limits.body_bytes;
  // As the chat route: every content type read as bytes, 415 answered in OpenAI's shape by the format's read.
  receiveBodies(app, { bodyBytes: bodyLimit, bounds: { maxItems: options.config.limits.max_items, maxValues: options.config.limits.max_values } });
  // The route is compactor's own: another method is answered here, never passed to the upstream (whose 404 would mislead).
  const notAllowed = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    sendError(reply, new MethodNotAllowedError(request.method, request.url.split('?')[0]!, ['POST']));
  };
  for (const url of ['/v1/compact', '/compact']) {
    app.post(url, { bodyLimit, config: { kind: 'compact', listKey: COMPACT_BODY_FORMAT.listKey } }, (request, reply) => runCompaction(request, reply, options));
    app.route({ method: ['GET', 'HEAD', 'PUT', 'DELETE', 'PATCH'], url, config: { kind: 'compact' }, handler: notAllowed });
  }
}
