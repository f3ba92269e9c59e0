import { readFileSync } from 'node:fs';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';

/**
 * At most `limits.max_connections` client connections at once, so clients
 * can never take every descriptor: each connection holds one, and a request
 * being answered needs another for its upstream connection. 300 connections
 * sending their headers or body a byte every 5 s (or nothing) under
 * `ulimit -n 256` left a normal request's connection reset; at 1,500 under
 * 1024 its upstream connect found no descriptor (a 502).
 *
 * Past the bound a new connection is not refused while another is only
 * holding a place: the connection served least recently that is not being
 * answered (idle keep-alive, headers or body still arriving, a 413's drain)
 * is closed for it. Only when every connection is being answered is the new
 * one closed. A request is never cut once its body has arrived.
 */

/** Descriptors kept for what is not a client connection: the listener, the store, the log, the runtime. */
const RESERVED_DESCRIPTORS = 64;
const FLOOR = 16;
/** Where the open-file limit cannot be read (no /proc): a bound a single process's clients rarely reach. */
const UNKNOWN_LIMIT_CONNECTIONS = 4096;
/** Closings are said at most this often (with their counts), not once per connection. */
const REPORT_EVERY_MS = 60_000;

export interface ConnectionBound {
  readonly max: number;
  /** How it was chosen, for the start line: `limits.max_connections 96 (auto: open-file limit 256)`. */
  readonly why: string;
}

/** The process's open-file limit from /proc/self/limits (Node raised the soft limit to the hard one at start), or null. */
export function openFileLimit(read: () => string = () => readFileSync('/proc/self/limits', 'utf8')): number | null {
  try {
    const soft = /^Max open files\s+(\d+)/m.exec(read())?.[1];
    return soft === undefined ? null : Number(soft);
  } catch {
    return null;
  }
}

/** `auto`: half the descriptors left past the reserved ones (each answered connection needs an upstream one too). */
export function connectionBoundOf(setting: number | 'auto', limit: number | null = setting === 'auto' ? openFileLimit() : null): ConnectionBound {
  if (setting !== 'auto') return { max: setting, why: `limits.max_connections ${setting}` };
  if (limit === null) return { max: UNKNOWN_LIMIT_CONNECTIONS, why: `limits.max_connections ${UNKNOWN_LIMIT_CONNECTIONS} (auto: open-file limit unknown)` };
  const max = Math.max(FLOOR, Math.floor((limit - RESERVED_DESCRIPTORS) / 2));
  return { max, why: `limits.max_connections ${max} (auto: open-file limit ${limit})` };
}

interface Exchange {
  readonly request: IncomingMessage;
  readonly response: ServerResponse;
}

/** Whether closing this connection cuts no request being answered. */
function holdsOnlyAPlace(exchange: Exchange | null): boolean {
  return exchange === null || !exchange.request.complete;
}

/** Keeps `server` within `bound.max` connections; returns how many are open, for tests and metrics. */
export function capConnections(server: Server, bound: ConnectionBound, log: FastifyBaseLogger, now: () => number = Date.now): { open(): number } {
  // In the order they were last served: the first that holds only a place is the one to close.
  const open = new Map<Socket, Exchange | null>();
  const closings = { idle: 0, refused: 0, reportedAt: Number.NEGATIVE_INFINITY };
  const report = (): void => {
    if (now() - closings.reportedAt < REPORT_EVERY_MS) return;
    const { idle, refused } = closings;
    log.warn({ closedIdle: idle, refused, max: bound.max }, `connections over limits.max_connections (${bound.max}): closed ${idle} not being answered, refused ${refused} new ones while all were`);
    Object.assign(closings, { idle: 0, refused: 0, reportedAt: now() });
  };
  server.on('connection', (socket: Socket) => {
    open.set(socket, null);
    socket.once('close', () => open.delete(socket));
    if (open.size <= bound.max) return;
    let victim: Socket = socket;
    for (const [candidate, exchange] of open) {
      if (candidate !== socket && holdsOnlyAPlace(exchange)) {
        victim = candidate;
        break;
      }
    }
    closings[victim === socket ? 'refused' : 'idle']++;
    open.delete(victim);
    victim.destroy();
    report();
  });
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket;
    if (!open.has(socket)) return;
    open.set(socket, { request, response });
    response.once('finish', () => {
      if (open.get(socket)?.response !== response) return;
      // Served just now: to the end of the line.
      open.delete(socket);
      if (!socket.destroyed) open.set(socket, null);
    });
  });
  return { open: () => open.size };
}
