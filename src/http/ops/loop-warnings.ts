import type { FastifyBaseLogger, FastifyRequest } from 'fastify';

/**
 * The operator is told of a loop once per origin: where the looped request
 * came from (the peer address) and the path it took (its whole `Via`), so
 * one loop repeating does not hide another (a second upstream, a summary
 * server) found later. Remembered origins are
 * bounded: past the bound they are forgotten, so a flood of distinct origins
 * costs at most one line each.
 */

const MAX_ORIGINS = 256;

export function loopWarner(): (request: FastifyRequest, log: FastifyBaseLogger) => void {
  const warned = new Set<string>();
  return (request, log) => {
    const via = request.headers.via;
    const origin = `${request.ip}|${Array.isArray(via) ? via.join(',') : (via ?? '')}`;
    if (warned.has(origin)) return;
    if (warned.size >= MAX_ORIGINS) warned.clear();
    warned.add(origin);
    log.warn({ peer: request.ip, via }, 'a request came back to compactor through its own upstream: upstream.url (or compaction.summary.upstream) points at compactor itself; answering 508');
  };
}
