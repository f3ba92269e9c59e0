import { discardBody } from '../../upstream/body.js';
import type { UpstreamResponse } from '../../upstream/client.js';
import { isContextExceeded } from '../../upstream/refusal.js';
import { extractUsage, type UsageFound } from '../../upstream/usage.js';
import type { ChunkTap } from '../relay.js';
import { relay } from '../relay.js';
import type { ChatExchange } from './exchange.js';
import { midStreamError } from './relay-stream.js';
import { type Sent, type UsageSource, hasUsageHooks, reportUsageLater } from './usage.js';

/**
 * How a JSON (non-streamed) answer is relayed: byte for byte as it comes,
 * with a copy kept when something must read it afterwards: the usage
 * figures of a 2xx answer, or an error answer's context-exceeded refusal
 * (counted in the metrics). A JSON body cut short cannot be mended: the
 * client's connection is cut, so it never passes for a whole answer.
 */

// A JSON answer copied for the usage tap beyond this size is not parsed:
// completions are small, and a huge one is not worth holding twice.
const MAX_TAPPED_JSON_BYTES = 8 * 1024 * 1024;
// An error body read for a refusal, or to relay as an SSE event after progress comments.
export const MAX_ERROR_BODY_BYTES = 1024 * 1024;

/** The answer's chunks, kept up to a limit (none past it), read once the client has them all. */
class JsonCopy implements ChunkTap, UsageSource {
  #chunks: Buffer[] | undefined = [];
  #length = 0;
  readonly #maxBytes: number;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  write(chunk: Buffer): void {
    this.#length += chunk.length;
    if (this.#length > this.#maxBytes) this.#chunks = undefined;
    else this.#chunks?.push(chunk);
  }

  /** The copy parsed, or undefined when it was too large or is not JSON. */
  parsed(): unknown {
    return this.#chunks === undefined ? undefined : parsedOrUndefined(Buffer.concat(this.#chunks));
  }

  /** Throws when the answer is not JSON (the usage hook's failure is logged); empty when the copy was too large. */
  usageFound(): UsageFound {
    return this.#chunks === undefined ? {} : extractUsage(JSON.parse(Buffer.concat(this.#chunks).toString('utf8')));
  }
}

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

/**
 * Relays a JSON answer whose head already went out. `encoded`: the upstream
 * compressed it, so there is nothing to read in the copy.
 */
export async function relayJson(exchange: ChatExchange, answer: UpstreamResponse, sent: Sent, encoded: boolean): Promise<void> {
  const { status, body } = answer;
  const record = exchange.record;
  const succeeded = status >= 200 && status < 300;
  const collectUsage = succeeded && hasUsageHooks(sent);
  // An error answer is read for a context-exceeded refusal: those are small JSON bodies.
  const readRefusal = !succeeded && exchange.route.options.onContextExceeded !== undefined;
  const copy = !encoded && (collectUsage || readRefusal) ? new JsonCopy(collectUsage ? MAX_TAPPED_JSON_BYTES : MAX_ERROR_BODY_BYTES) : undefined;

  const end = await relay(body, exchange.response, copy);
  record.bytes += end.bytes;
  switch (end.kind) {
    case 'client-closed':
      exchange.relayLeft(body);
      return;
    case 'failed': {
      const error = exchange.endedBy ?? midStreamError(end.error);
      // A JSON body (or a compressed one) cut short cannot be mended.
      exchange.cutWithError(error);
      return;
    }
    case 'ended':
      break;
  }
  exchange.response.end();
  if (readRefusal && copy !== undefined && isContextExceeded(copy.parsed())) exchange.route.options.onContextExceeded?.(sent.context.body.model);
  if (collectUsage) reportUsageLater({ sent, status, streamed: false, source: copy, log: exchange.request.log });
}
