import type { Readable } from 'node:stream';
import { UpstreamBadResponseError } from '../errors.js';

function ignore(): void {}

/**
 * Ends an upstream body that will not be read (its connection is closed).
 * undici emits an abort error when an unfinished body is destroyed; it is
 * expected here, so it is swallowed instead of crashing the process.
 */
export function discardBody(body: Readable): void {
  body.on('error', ignore);
  body.destroy();
}

/** Reads a whole body; past `maxBytes` it is dropped and the read rejects with `UpstreamBadResponseError`. */
export async function readBody(body: Readable, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    length += chunk.length;
    if (length > maxBytes) {
      discardBody(body);
      throw new UpstreamBadResponseError({ message: `the upstream answer is larger than ${maxBytes} bytes` });
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, length);
}
