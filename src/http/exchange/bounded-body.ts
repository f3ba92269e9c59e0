import { discardBody } from '../../upstream/body.js';
import type { UpstreamResponse } from '../../upstream/client.js';

/**
 * An upstream body read whole for the client's side, up to a bound: an
 * error answer to word as an SSE event after progress comments, or a
 * refusal to learn a window from. (Reading an answer compactor asked for
 * itself is upstream/body.ts's `readBody`, which fails past its bound.)
 */

// An error body read for a refusal, or to relay as an SSE event after progress comments.
export const MAX_ERROR_BODY_BYTES = 1024 * 1024;

export function parsedOrUndefined(bytes: Buffer): unknown {
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch {
    return undefined;
  }
}

/** Reads at most `maxBytes` of a body (the rest is dropped). */
export async function readLimited(body: UpstreamResponse['body'], maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    length += chunk.length;
    if (length > maxBytes) break;
    chunks.push(chunk);
  }
  discardBody(body);
  return Buffer.concat(chunks);
}

