import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { MethodNotAllowedError } from '../../errors.js';
import { type CompactRouteOptions, runCompaction } from '../exchange/compact-history.js';
import { sendError } from '../edge/request-record.js';
import { type ResponsesCompactOptions, runResponsesCompaction } from '../exchange/responses-compact.js';
import { receiveBodies } from '../edge/body-receiver.js';
import { COMPACT_BODY_FORMAT, RESPONSES_COMPACT_FORMAT } from '../../formats/registry.js';

/**
 * `POST /v1/compact` (and `/compact`) and `POST /v1/responses/compact` (and
 * `/responses/compact`): registration only; the requests are
 * src/http/exchange/compact-history.ts's and responses-compact.ts's.
 */

export type { CompactRouteOptions } from '../exchange/compact-history.js';

export async function compactRoutes(app: FastifyInstance, options: CompactRouteOptions & Pick<ResponsesCompactOptions, 'seal' | 'onSealed' | 'onCarried'>): Promise<void> {
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
  // OpenAI's compaction endpoint (issue 38): a local server answers it 404, so it is never passed on.
  for (const url of ['/v1/responses/compact', '/responses/compact']) {
    app.post(url, { bodyLimit, config: { kind: 'compact', listKey: RESPONSES_COMPACT_FORMAT.listKey } }, (request, reply) => runResponsesCompaction(request, reply, options));
    app.route({ method: ['GET', 'HEAD', 'PUT', 'DELETE', 'PATCH'], url, config: { kind: 'compact' }, handler: notAllowed });
  }
}
