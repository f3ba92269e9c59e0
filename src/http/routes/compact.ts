import type { FastifyInstance } from 'fastify';
import { type CompactRouteOptions, runCompaction } from '../compact.js';

/** `POST /v1/compact` (and `/compact`): registration only; the request is src/http/compact.ts's. */

export type { CompactRouteOptions } from '../compact.js';

export async function compactRoutes(app: FastifyInstance, options: CompactRouteOptions): Promise<void> {
  const bodyLimit = options.config.limits.body_bytes;
  // As the chat route: every content type read as bytes, 415 answered in OpenAI's shape by the format's read.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit }, (_request, body, done) => {
    done(null, body);
  });
  for (const url of ['/v1/compact', '/compact']) app.post(url, { bodyLimit, config: { kind: 'compact' } }, (request, reply) => runCompaction(request, reply, options));
}
