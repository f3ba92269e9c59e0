import type { IncomingMessage } from 'node:http';

/**
 * What is left of a request body after an early answer (the 413 for a body
 * over `limits.body_bytes`) is read and dropped, within bounds, before the
 * connection may close.
 *
 * Closing a socket with unread bytes in it makes the kernel send a reset
 * rather than a clean end, and a client still uploading then sees EPIPE or
 * ECONNRESET instead of the answer waiting in its buffer: a 40 MB body got a
 * reset in 8 of 10 fresh connections, and the openai SDK retried it as a
 * network error, uploading 40 MB eight times for five calls. Read to its
 * end, the body costs bandwidth only (nothing is kept), the client reads its
 * 413, and the connection serves its next request.
 */

export interface DiscardBounds {
  /** Most body bytes dropped after the answer; past them the connection is cut. */
  readonly maxBytes: number;
  /** Longest the rest of a body may take to arrive; past it the connection is cut. */
  readonly maxMs: number;
}

// A body a few times the limit is a client that misjudged it (a long agent transcript), and is served its 413;
// the floor keeps a small configured limit from cutting a 40 MB upload, which loopback moves in ~0.1 s.
const DISCARD_LIMIT_FACTOR = 4;
const DISCARD_MIN_BYTES = 64 * 1024 * 1024;
// 128 MiB (4 × 32 MiB) at 20 Mbit/s takes under a minute; a client slower than that holds the connection no longer.
const DISCARD_MAX_MS = 60_000;

/** The bounds for a body limit of `limitBytes`. */
export function discardBoundsFor(limitBytes: number): DiscardBounds {
  return { maxBytes: Math.max(DISCARD_LIMIT_FACTOR * limitBytes, DISCARD_MIN_BYTES), maxMs: DISCARD_MAX_MS };
}

function ignore(): void {}

/** Reads and drops the rest of `request`'s body; cuts its connection once `bounds` are passed. */
export function discardRestOfBody(request: IncomingMessage, bounds: DiscardBounds): void {
  if (request.complete) return;
  let dropped = 0;
  const cut = (): void => {
    clearTimeout(timer);
    request.socket.destroy();
  };
  const timer = setTimeout(cut, bounds.maxMs);
  timer.unref();
  request.on('data', (chunk: Buffer) => {
    dropped += chunk.length;
    if (dropped > bounds.maxBytes) cut();
  });
  request.once('end', () => clearTimeout(timer));
  request.once('close', () => clearTimeout(timer));
  // A client that leaves mid-body is no error here.
  request.on('error', ignore);
  request.resume();
}
