import type { FastifyInstance } from 'fastify';
import type { Upstream } from '../../upstream/client.js';
import type { Metrics } from '../ops/metrics.js';

/**
 * compactor's own endpoints: `/healthz` (the process), `/readyz` (the
 * upstream answers; with the context window found per model) and `/metrics`
 * (Prometheus).
 */

export interface OpsRouteOptions {
  readonly upstream: Upstream;
  readonly isDraining: () => boolean;
  /** Seconds a draining compactor asks clients to wait. */
  readonly retryAfterSeconds: number;
  readonly metrics: Metrics;
  /** The context window known per model (none when compaction is replaced by a planner). */
  readonly windows?: () => Promise<Record<string, number | null>>;
  /** The epoch store and its state (`redis (degraded: memory)` while Redis is down: still ready). */
  readonly store?: () => string;
}

export async function opsRoutes(app: FastifyInstance, options: OpsRouteOptions): Promise<void> {
  const { upstream, isDraining, retryAfterSeconds, metrics, windows, store } = options;

  // Alive as long as the process can answer, even while draining: restarting it would not help.
  app.get('/healthz', { config: { kind: 'ops' } }, async (_request, reply) => {
    return reply.code(200).send({ status: 'ok' });
  });

  app.get('/readyz', { config: { kind: 'ops' } }, async (_request, reply) => {
    if (isDraining()) {
      return reply.code(503).header('retry-after', String(retryAfterSeconds)).send({ status: 'draining' });
    }
    const health = await upstream.health();
    if (!health.ready) return reply.code(503).send({ status: 'upstream unavailable', upstream_status: health.status });
    return reply.code(200).send({ status: 'ready', ...(store === undefined ? {} : { store: store() }), ...(windows === undefined ? {} : { windows: await windows() }) });
  });

  app.get('/metrics', { config: { kind: 'ops' } }, async (_request, reply) => {
    return reply.code(200).header('content-type', metrics.contentType).send(await metrics.text());
  });
}
