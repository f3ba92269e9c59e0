import type { FastifyInstance } from 'fastify';
import type { UpstreamClient } from '../../upstream/client.js';

/** compactor's own endpoints: `/healthz` (the process) and `/readyz` (the upstream answers). */

export interface OpsRouteOptions {
  readonly upstream: UpstreamClient;
  readonly isDraining: () => boolean;
  /** Seconds a draining compactor asks clients to wait. */
  readonly retryAfterSeconds: number;
}

export async function opsRoutes(app: FastifyInstance, options: OpsRouteOptions): Promise<void> {
  const { upstream, isDraining, retryAfterSeconds } = options;

  // Alive as long as the process can answer, even while draining: restarting it would not help.
  app.get('/healthz', { config: { kind: 'ops' } }, async (_request, reply) => {
    return reply.code(200).send({ status: 'ok' });
  });

  app.get('/readyz', { config: { kind: 'ops' } }, async (_request, reply) => {
    if (isDraining()) {
      return reply.code(503).header('retry-after', String(retryAfterSeconds)).send({ status: 'draining' });
    }
    const health = await upstream.health();
    if (health.ready) return reply.code(200).send({ status: 'ready' });
    return reply.code(503).send({ status: 'upstream unavailable', upstream_status: health.status });
  });
}
