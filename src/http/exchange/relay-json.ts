import { MAX_ERROR_BODY_BYTES, parsedOrUndefined } from './bounded-body.js';
import type { UpstreamResponse } from '../../upstream/client.js';
import { isContextExceeded } from '../../upstream/refusal.js';
import { extractUsage, type UsageFound, type UsageWords } from '../../upstream/usage.js';
import { usageOfJsonText } from '../../upstream/usage-text.js';
import type { ChunkTap, ReadAhead } from './relay.js';
import { relay } from './relay.js';
import type { AnswerWriter } from './answer.js';
import type { Forwarded } from './ask-planner.js';
import { midStreamError } from './relay-stream.js';
import { type UsageSource, hasUsageHooks, reportUsageLater, serverTimesOf } from './usage-hooks.js';

/**
 * How a JSON (non-streamed) answer is relayed: byte for byte as it comes,
 * with a copy kept when something must read it afterwards: the usage
 * figures of a 2xx answer, or an error answer's context-exceeded refusal
 * (counted in the metrics). A JSON body cut short cannot be mended: the
 * client's connection is cut, so it never passes for a whole answer. With
 * `ahead` (see respond.ts) the body is read on while the client is slow.
 */

// A JSON answer copied for the usage tap beyond this size is not parsed:
// completions are small, and a huge one is not worth holding twice.
const MAX_TAPPED_JSON_BYTES = 8 * 1024 * 1024;

/** The answer's chunks, kept up to a limit (none past it), read once the client has them all. */
class JsonCopy implements ChunkTap, UsageSource {
  #chunks: Buffer[] | undefined = [];
  #length = 0;
  readonly #maxBytes: number;
  readonly #usageWords: UsageWords;

  /** `usageWords`: where the route's wire format says what an answer cost. */
  constructor(maxBytes: number, usageWords: UsageWords) {
    this.#maxBytes = maxBytes;
    this.#usageWords = usageWords;
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

  /**
   * `usage` and `timings` only are parsed when they can be found in the text, else the whole answer.
   * Throws when the answer is not JSON (the usage hook's failure is logged); empty when the copy was too large.
   */
  usageFound(): UsageFound {
    if (this.#chunks === undefined) return {};
    const text = Buffer.concat(this.#chunks).toString('utf8');
    return usageOfJsonText(text, this.#usageWords) ?? extractUsage(JSON.parse(text), this.#usageWords);
  }
}

/**
 * Relays a JSON answer whose head already went out. `encoded`: the upstream
 * compressed it, so there is nothing to read in the copy.
 */
export async function relayJson(writer: AnswerWriter, answer: UpstreamResponse, forwarded: Forwarded, encoded: boolean, ahead?: ReadAhead): Promise<void> {
  const { status, body } = answer;
  const record = writer.record;
  const succeeded = status >= 200 && status < 300;
  const collectUsage = succeeded && hasUsageHooks(forwarded, writer.route.options.hooks.onUsage);
  // An error answer is read for a context-exceeded refusal: those are small JSON bodies.
  const readRefusal = !succeeded && writer.route.options.onContextExceeded !== undefined;
  const copy = !encoded && (collectUsage || readRefusal) ? new JsonCopy(collectUsage ? MAX_TAPPED_JSON_BYTES : MAX_ERROR_BODY_BYTES, writer.route.format.usage) : undefined;

  const end = await relay(body, writer.response, copy, ahead);
  record.bytes += end.bytes;
  switch (end.kind) {
    case 'client-closed':
      writer.relayLeft(body);
      return;
    case 'failed': {
      const error = writer.endedBy ?? midStreamError(end.error);
      // A JSON body (or a compressed one) cut short cannot be mended.
      writer.cutWithError(error);
      return;
    }
    case 'ended':
      break;
  }
  writer.response.end();
  if (readRefusal && copy !== undefined && isContextExceeded(copy.parsed())) writer.route.options.onContextExceeded?.(forwarded.figures.model);
  if (!collectUsage) return;
  // Read here, once, so the log line carries the server's timings; the hooks still run on the next turn of the loop.
  let found: UsageFound | undefined;
  try {
    found = copy?.usageFound();
  } catch {
    found = undefined;
  }
  record.server = serverTimesOf(found?.timings);
  const source = found === undefined ? copy : { usageFound: () => found };
  reportUsageLater({ forwarded, appUsage: writer.route.options.hooks.onUsage, status, streamed: false, source, log: writer.request.log });
}
