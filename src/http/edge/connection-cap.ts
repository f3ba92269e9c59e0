import { readFileSync } from 'node:fs';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import { TooManyConnectionsError } from '../../errors.js';

/**
 * At most `limits.max_connections` client connections at once, so clients
 * can never take every descriptor: each connection holds one, and a request
 * being answered needs another for its upstream connection. 300 connections
 * sending their headers or body a byte every 5 s (or nothing) under
 * `ulimit -n 256` left a normal request's connection reset; at 1,500 under
 * 1024 its upstream connect found no descriptor (a 502).
 *
 * Past the bound, one client can never make room for itself at another's
 * cost (issue 34 item 1: the connection served longest ago went first, so 96
 * silent connections from one address reset 5 of 5 other clients' uploads
 * and 5 of 5 idle keep-alives). Connections are counted per client address;
 * the client holding the most pays: its newest connection that is idle or
 * silent is closed. When that is the newcomer itself (the client holding the
 * most is the one asking), or the client holding the most has nothing idle
 * or silent, the newcomer is answered a 503 on the descriptor it already
 * holds and closed. A request whose body has arrived is never cut, nor an
 * upload that is making progress.
 */

/** Descriptors kept for what is not a client connection: the listener, the store, the log, the runtime. */
const RESERVED_DESCRIPTORS = 64;
const FLOOR = 16;
/** Where the open-file limit cannot be read (no /proc): a bound a single process's clients rarely reach. */
const UNKNOWN_LIMIT_CONNECTIONS = 4096;
/** Closings are said at most this often (with their counts), not once per connection. */
const REPORT_EVERY_MS = 60_000;
/** The first closing of a quiet spell is said this long after it, with every closing of the burst it began counted. */
const REPORT_AFTER_MS = 1_000;
/**
 * Below this rate (bytes a second, averaged since the connection opened or
 * its last answer ended) a connection is silent, whatever it is sending: a
 * body trickled at 1 KiB/s would take 9 hours for `limits.body_bytes`, and
 * the trickles that held descriptors sent a byte every 5 s. Any real
 * client's upload or header block arrives orders of magnitude faster.
 */
const PROGRESS_BYTES_PER_SECOND = 1024;
/** The rate is averaged over at least this long: a connection is not silent for its first second's pause. */
const PROGRESS_WINDOW_MS = 1_000;
const RETRY_AFTER_SECONDS = 1;

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

/** One client connection as the bound sees it. */
interface Held {
  readonly address: string;
  /** The request on it, from its headers to the end of its answer; null between requests. */
  exchange: { readonly request: IncomingMessage; readonly response: ServerResponse } | null;
  /** `socket.bytesRead` and the time when it opened or its last answer ended: its rate is measured from here. */
  since: { bytes: number; at: number };
}

/** Whether closing this connection cuts nothing: no answer under way, and nothing arriving at a real client's pace. */
function idleOrSilent(socket: Socket, held: Held, now: number): boolean {
  if (held.exchange?.request.complete === true) return false;
  const elapsed = Math.max(PROGRESS_WINDOW_MS, now - held.since.at);
  return ((socket.bytesRead - held.since.bytes) * 1000) / elapsed < PROGRESS_BYTES_PER_SECOND;
}

/** The raw 503 a refused newcomer reads before its connection closes (it has not been parsed as a request, so no reply object exists). */
function refusalBytes(max: number): string {
  const error = new TooManyConnectionsError(max, RETRY_AFTER_SECONDS);
  const body = JSON.stringify(error.toBody());
  const headers = Object.entries({ 'content-type': 'application/json', ...error.headers, 'content-length': String(Buffer.byteLength(body)) });
  return `HTTP/1.1 ${error.status} Service Unavailable\r\n${headers.map(([name, value]) => `${name}: ${value}\r\n`).join('')}\r\n${body}`;
}

export interface CapOptions {
  readonly now?: () => number;
  /** When the closings are said (tests call it themselves). */
  readonly schedule?: (report: () => void, ms: number) => void;
}

/** Keeps `server` within `bound.max` connections; returns how many are open, for tests and metrics. */
export function capConnections(server: Server, bound: ConnectionBound, log: FastifyBaseLogger, options: CapOptions = {}): { open(): number } {
  const now = options.now ?? Date.now;
  const schedule = options.schedule ?? ((report, ms) => setTimeout(report, ms).unref());
  // In the order they opened, per client address (the newest last).
  const byAddress = new Map<string, Map<Socket, Held>>();
  let open = 0;
  const closings = { closed: 0, refused: 0, scheduled: false, reportedAt: Number.NEGATIVE_INFINITY };
  const report = (): void => {
    const { closed, refused } = closings;
    closings.scheduled = false;
    if (closed + refused === 0) return;
    log.warn(
      { closed, refused, max: bound.max },
      `connections over limits.max_connections (${bound.max}): closed ${closed} idle or silent connections of the client holding the most, refused ${refused} new ones with a 503`,
    );
    Object.assign(closings, { closed: 0, refused: 0, reportedAt: now() });
  };
  const counted = (kind: 'closed' | 'refused'): void => {
    closings[kind]++;
    if (closings.scheduled) return;
    closings.scheduled = true;
    schedule(report, Math.max(REPORT_AFTER_MS, closings.reportedAt + REPORT_EVERY_MS - now()));
  };
  const forget = (socket: Socket, address: string): void => {
    const held = byAddress.get(address);
    if (held?.delete(socket) !== true) return;
    open--;
    if (held.size === 0) byAddress.delete(address);
  };
  /** The client holding the most connections; on a tie, `preferred` (the newcomer's: it pays rather than another). */
  const heaviest = (preferred: string): Map<Socket, Held> => {
    let most = byAddress.get(preferred)!;
    for (const held of byAddress.values()) if (held.size > most.size) most = held;
    return most;
  };
  const newestIdleOrSilent = (held: Map<Socket, Held>): Socket | undefined => {
    const at = now();
    const sockets = [...held.keys()];
    for (let index = sockets.length - 1; index >= 0; index--) {
      const socket = sockets[index]!;
      if (idleOrSilent(socket, held.get(socket)!, at)) return socket;
    }
    return undefined;
  };

  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
    let held = byAddress.get(address);
    if (held === undefined) byAddress.set(address, (held = new Map()));
    held.set(socket, { address, exchange: null, since: { bytes: 0, at: now() } });
    open++;
    socket.once('close', () => forget(socket, address));
    if (open <= bound.max) return;
    const most = heaviest(address);
    const victim = newestIdleOrSilent(most);
    if (victim !== undefined && victim !== socket) {
      forget(victim, most.get(victim)!.address);
      victim.destroy();
      counted('closed');
      return;
    }
    forget(socket, address);
    // Answered on the descriptor it already holds, then closed once the answer is written.
    socket.end(refusalBytes(bound.max), () => socket.destroy());
    counted('refused');
  });
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket;
    const held = byAddress.get(socket.remoteAddress ?? '')?.get(socket);
    if (held === undefined) return;
    held.exchange = { request, response };
    response.once('finish', () => {
      if (held.exchange?.response !== response) return;
      // Between requests: idle, its rate measured afresh.
      held.exchange = null;
      held.since = { bytes: socket.bytesRead, at: now() };
    });
  });
  return { open: () => open };
}
