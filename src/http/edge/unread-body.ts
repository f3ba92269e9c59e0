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
  /** `limits.drain_min_bytes_per_s`: a drain that brings fewer bytes per second (over a window) is cut. */
  readonly minBytesPerSecond?: number;
}

/**
 * Over windows this long a drain must bring `minBytesPerSecond`: long enough
 * for a TCP stall on a real link, short enough that a trickle (a byte every
 * 5 s) is gone within seconds rather than holding its descriptor for 60 s.
 */
const RATE_WINDOW_MS = 2_000;

// A body a few times the limit is a client that misjudged it (a long agent transcript), and is served its 413;
// the floor keeps a small configured limit from cutting a 40 MB upload, which loopback moves in ~0.1 s.
const DISCARD_LIMIT_FACTOR = 4;
const DISCARD_MIN_BYTES = 64 * 1024 * 1024;
// 128 MiB (4 × 32 MiB) at 20 Mbit/s takes under a minute; a client slower than that holds the connection no longer.
const DISCARD_MAX_MS = 60_000;

/** The bounds for a body limit of `limitBytes`. */
export function discardBoundsFor(limitBytes: number, minBytesPerSecond?: number): DiscardBounds {
  return { maxBytes: Math.max(DISCARD_LIMIT_FACTOR * limitBytes, DISCARD_MIN_BYTES), maxMs: DISCARD_MAX_MS, ...(minBytesPerSecond === undefined ? {} : { minBytesPerSecond }) };
}

function ignore(): void {}

/** Reads and drops the rest of `request`'s body; cuts its connection once `bounds` are passed. `onDone` is told once it is over. */
export function discardRestOfBody(request: IncomingMessage, bounds: DiscardBounds, onDone: () => void = ignore): void {
  if (request.complete) return onDone();
  let dropped = 0;
  let inWindow = 0;
  let finished = false;
  const finish = (): void => {
    if (finished) return;
    finished = true;
    clearTimeout(timer);
    clearInterval(rate);
    onDone();
  };
  const cut = (): void => {
    finish();
    // Destroying a request whose body is unfinished destroys its socket (node's IncomingMessage); it also works on
    // fastify.inject's stand-in, whose socket has no destroy (a cut from a timer threw out of the process there).
    request.destroy();
  };
  const timer = setTimeout(cut, bounds.maxMs);
  timer.unref();
  const minWindowBytes = ((bounds.minBytesPerSecond ?? 0) * RATE_WINDOW_MS) / 1000;
  const rate = setInterval(() => {
    if (inWindow < minWindowBytes) cut();
    inWindow = 0;
  }, RATE_WINDOW_MS);
  rate.unref();
  request.on('data', (chunk: Buffer) => {
    dropped += chunk.length;
    inWindow += chunk.length;
    if (dropped > bounds.maxBytes) cut();
  });
  request.once('end', finish);
  request.once('close', finish);
  // A client that leaves mid-body is no error here.
  request.on('error', ignore);
  request.resume();
}

/**
 * The drains under way, at most `maxDraining` at once (`limits.max_draining`):
 * each holds a connection and its descriptor, and 1,500 held ones left a
 * normal request's upstream connect without one. Past the bound the 413 is
 * sent with `Connection: close` and nothing is drained.
 */
export class BodyDrains {
  #draining = 0;

  constructor(
    readonly bounds: DiscardBounds,
    readonly maxDraining: number,
  ) {}

  get draining(): number {
    return this.#draining;
  }

  /** Starts draining `request`'s body, or says false when `limits.max_draining` drains are under way already. */
  tryDiscard(request: IncomingMessage): boolean {
    if (request.complete) return true;
    if (this.#draining >= this.maxDraining) return false;
    this.#draining++;
    discardRestOfBody(request, this.bounds, () => this.#draining--);
    return true;
  }
}
