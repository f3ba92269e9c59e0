import type { Readable } from 'node:stream';
import { setImmediate as nextTurnOfTheEventLoop } from 'node:timers/promises';
import { type FastifyInstance, type FastifyRequest, errorCodes } from 'fastify';
import { ArrivingScan, type BodyScan, PARSE_AHEAD_BYTES, type ScanBounds } from '../../formats/registry.js';
import { joinedInSlices, runInSlices } from '../../transcript/slices.js';

/**
 * The client's body taken off the connection for the chat and compact
 * routes, in place of Fastify's `parseAs: 'buffer'` (issue 34, the 50 ms
 * `/healthz` target). Fastify keeps every chunk until the last one, then
 * copies them into one buffer at once (50–100 ms of a held loop for 32 MiB
 * on a busy machine), and the scan that follows (formats/body-scan.ts) read
 * the whole body again a MiB at a time. Here a large body (a declared
 * Content-Length of `PARSE_AHEAD_BYTES` or more) goes into one buffer of its
 * declared length as each chunk arrives, and what arrived is scanned where it
 * landed, up to a MiB per turn of the loop: when the last byte is in, the
 * body is copied and (nearly all) scanned, and the parse-ahead (formats/parse-ahead.ts) starts
 * from the scan. A body past `limits.max_items` or `limits.max_values` is
 * known as soon as the scan passes the bound: the rest of it is read and
 * dropped, not kept, and the exchange answers the refusal in its format's
 * shape before anything parses (the 10 million empty objects of issue 34
 * are refused at their 500,001st value, ~1.5 MiB in).
 *
 * One buffer rather than the chunk list Fastify had: every reader of the
 * bytes (the sliced parse, the splice and write-back, the slot pin, the
 * whole-body parse a large body falls back to) reads offsets in one buffer,
 * and the copy of each chunk on arrival costs microseconds, where the copy
 * of them all at the end held the loop. The buffer is allocated once the
 * first `PARSE_AHEAD_BYTES` have come, not on the header's word alone: a
 * client declaring 32 MiB and sending nothing holds only what it sent.
 *
 * Small bodies, and bodies sent without a Content-Length (chunked), are kept
 * as chunks and joined at the end as Fastify joins them; a chunked body of a
 * MiB or more is joined a MiB per turn of the loop, and scanned later by the
 * parse-ahead as before.
 */

/** What the receipt found of a large body, beside its bytes (Fastify's `request.body`). */
export interface BodyArrival {
  /** The bytes the scan followed: it holds for these only. */
  readonly bytes: Buffer;
  /** The top-level key the scan looked for (the route's `listKey`). */
  readonly listKey: string;
  /** The scan's result, or the refusal it met (a 413 past `limits.max_items` or `limits.max_values`). */
  readonly scan: BodyScan | Error;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the body receiver for a large body it scanned on arrival; null otherwise. */
    arrival: BodyArrival | null;
  }
  interface FastifyContextConfig {
    /** The top-level key of the route's conversation list (the wire format's `listKey`): a large body is scanned for it as it arrives. */
    listKey?: string;
  }
}

export interface ReceiverOptions {
  /** `limits.body_bytes`: past it, a 413 (Fastify's own error, answered and drained as before). */
  readonly bodyBytes: number;
  readonly bounds: ScanBounds;
}

/** Registers the receiver as the only content-type parser of `app` (every content type: the routes answer 415 themselves). */
export function receiveBodies(app: FastifyInstance, options: ReceiverOptions): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { bodyLimit: options.bodyBytes }, (request: FastifyRequest, payload: unknown) => receiveBody(request, (payload ?? request.raw) as Readable, options));
}

/** The body of `request`, read from `payload`; sets `request.arrival` when a large one was scanned on arrival. */
export function receiveBody(request: FastifyRequest, payload: Readable, options: ReceiverOptions): Promise<Buffer> {
  const declared = Number(request.headers['content-length']);
  if (declared > options.bodyBytes) return Promise.reject(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
  const listKey = request.routeOptions.config.listKey;
  const receipt = new Receipt(Number.isInteger(declared) ? declared : null, listKey, options);
  return new Promise<Buffer>((resolve, reject) => {
    const stop = (): void => {
      payload.removeListener('data', onData);
      payload.removeListener('end', onEnd);
      payload.removeListener('error', onError);
    };
    const onData = (chunk: Buffer | string): void => {
      const taken = receipt.take(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
      if (taken !== null) {
        stop();
        reject(taken);
      }
    };
    const onEnd = (): void => {
      stop();
      receipt.end().then(({ body, arrival }) => {
        request.arrival = arrival;
        resolve(body);
      }, reject);
    };
    const onError = (error: Error & { statusCode?: number }): void => {
      stop();
      // A client that left mid-body, or a broken stream: a 400 as Fastify words it.
      if (!(typeof error.statusCode === 'number' && error.statusCode >= 400)) error.statusCode = 400;
      reject(error);
    };
    payload.on('data', onData);
    payload.on('end', onEnd);
    payload.on('error', onError);
    payload.resume();
  });
}

/** One body being received. */
class Receipt {
  #received = 0;
  #chunks: Buffer[] = [];
  /** The body's buffer of its declared length, once a large one is under way. */
  #bytes: Buffer | null = null;
  #scan: ArrivingScan | null = null;
  /** The refusal the scan met: from then on the bytes are dropped. */
  #refused: Error | null = null;
  /** Resolved when the scan has caught up with what arrived (a slice per turn while it lags). */
  #scanning: Promise<void> | null = null;

  constructor(
    readonly declared: number | null,
    readonly listKey: string | undefined,
    readonly options: ReceiverOptions,
  ) {}


  /** Takes one chunk; answers the error that ends the receipt, or null. */
  take(chunk: Buffer): Error | null {
    const at = this.#received;
    this.#received += chunk.length;
    if (this.#received > this.options.bodyBytes) return new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE();
    if (this.#refused !== null) return null;
    if (this.#bytes !== null) {
      if (this.#received > this.#bytes.length) return new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH();
      chunk.copy(this.#bytes, at);
      this.#scanOn();
      return null;
    }
    this.#chunks.push(chunk);
    if (this.declared !== null && this.listKey !== undefined && this.declared >= PARSE_AHEAD_BYTES && this.#received >= PARSE_AHEAD_BYTES) this.#startLarge();
    return null;
  }

  /** A large body under way: its buffer, the chunks so far copied in, the scan started. */
  #startLarge(): void {
    if (this.#received > this.declared!) return;
    const bytes = Buffer.allocUnsafe(this.declared!);
    let at = 0;
    for (const chunk of this.#chunks) at += chunk.copy(bytes, at);
    this.#chunks = [];
    this.#bytes = bytes;
    this.#scan = new ArrivingScan(bytes, this.listKey!, this.options.bounds);
    this.#scanOn();
  }

  /**
   * Scans what arrived, a slice per turn of the loop, never in the data
   * handler itself: one turn of the loop may bring many chunks (libuv reads
   * a socket up to 32 times, 64 KiB each, before it runs anything else), and
   * scanning each where it lands made one turn scan 2 MiB (measured: the
   * longest stall left on the shared-id shape).
   */
  #scanOn(): void {
    if (this.#scanning !== null || this.#refused !== null) return;
    this.#scanning = this.#catchUp();
  }

  #scanSlice(): void {
    try {
      this.#scan!.arrived(this.#received);
    } catch (error) {
      // Past a bound: nothing more is kept, the rest of the body is read and dropped, the exchange answers the refusal.
      this.#refused = error as Error;
      this.#bytes = Buffer.alloc(0);
    }
  }

  async #catchUp(): Promise<void> {
    do {
      await nextTurnOfTheEventLoop();
      this.#scanSlice();
    } while (this.#refused === null && this.#scan!.behind);
    this.#scanning = null;
  }

  /** The whole body, once its last byte arrived, and what its scan found when it was scanned on arrival. */
  async end(): Promise<{ body: Buffer; arrival: BodyArrival | null }> {
    if (this.declared !== null && this.#received !== this.declared) throw new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH();
    if (this.#bytes !== null && this.#scan !== null) {
      while (this.#scanning !== null) await this.#scanning;
      const body = this.#bytes;
      return { body, arrival: { bytes: body, listKey: this.#scan.listKey, scan: this.#refused ?? this.#scan.result() } };
    }
    // Copied even when one chunk, as Fastify copies it: a chunk may be a view of the connection's read buffer.
    if (this.#received < PARSE_AHEAD_BYTES) return { body: Buffer.concat(this.#chunks, this.#received), arrival: null };
    return { body: await runInSlices(joinedInSlices(this.#chunks), nextTurnOfTheEventLoop), arrival: null };
  }
}
