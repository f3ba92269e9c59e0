import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { discardRestOfBody } from '../../../src/http/edge/unread-body.js';

/** A request body still arriving, on a stand-in socket without `destroy` (as fastify.inject's is). */
function arriving(): PassThrough & { complete: boolean; socket: object } {
  return Object.assign(new PassThrough(), { complete: false, socket: {} });
}

describe('discardRestOfBody', () => {
  it('cuts a body past its bound also on a socket without destroy, rather than throwing from a timer or a data event', async () => {
    const request = arriving();
    let done = 0;
    discardRestOfBody(request as unknown as IncomingMessage, { maxBytes: 10, maxMs: 60_000 }, () => done++);
    request.write(Buffer.alloc(20));
    await new Promise((resolve) => request.once('close', resolve));
    expect(request.destroyed).toBe(true);
    expect(done).toBe(1);
  });

  it('drops what arrives within its bound and tells when the body ended', async () => {
    const request = arriving();
    let done = 0;
    discardRestOfBody(request as unknown as IncomingMessage, { maxBytes: 100, maxMs: 60_000 }, () => done++);
    request.end(Buffer.alloc(20));
    await new Promise((resolve) => request.once('end', resolve));
    // It was read to its end, not cut.
    expect(request.readableEnded).toBe(true);
    expect(done).toBe(1);
  });
});
