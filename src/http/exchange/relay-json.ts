import type { OutgoingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
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
import { compactorLine } from './server-line.js';

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

/** How reading a JSON answer whole ended: all of it, its first `maxBytes` and more to come (the source paused), or a failure. */
type WholeRead =
  | { readonly kind: 'whole'; readonly chunks: Buffer[]; readonly bytes: number }
  | { readonly kind: 'too-large'; readonly chunks: Buffer[]; readonly bytes: number }
  | { readonly kind: 'failed'; readonly error: Error };

/** Reads `source` to its end, or to past `maxBytes` (then pauses it, the chunks so far kept). */
function readWhole(source: Readable, maxBytes: number): Promise<WholeRead> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    const finish = (read: WholeRead): void => {
      source.off('data', onData);
      source.off('end', onEnd);
      source.off('error', onError);
      source.off('close', onClose);
      resolve(read);
    };
    const onData = (chunk: Buffer): void => {
      chunks.push(chunk);
      bytes += chunk.length;
      if (bytes <= maxBytes) return;
      source.pause();
      finish({ kind: 'too-large', chunks, bytes });
    };
    const onEnd = (): void => finish({ kind: 'whole', chunks, bytes });
    const onError = (error: Error): void => finish({ kind: 'failed', error });
    // A source destroyed without an error still did not end: a failure.
    const onClose = (): void => {
      if (!source.readableEnded) finish({ kind: 'failed', error: new Error('the upstream response closed early') });
    };
    source.on('data', onData);
    source.once('end', onEnd);
    source.once('error', onError);
    source.once('close', onClose);
  });
}

/**
 * Relays a 2xx JSON answer whose head has not gone out: it is read whole
 * first (a completion is small; past {@link MAX_TAPPED_JSON_BYTES} the rest
 * is relayed as it comes, with the head as it was), so `x-compactor` can
 * carry what the server said it spent (`setLine` puts the whole line in
 * `headers`). Reading it whole also frees the upstream (and its slot) at
 * once, whatever the client's pace, and lets a body cut short get a JSON
 * error instead of a cut connection, since nothing went out yet.
 */
export async function relayWholeJson(writer: AnswerWriter, answer: UpstreamResponse, forwarded: Forwarded, headers: OutgoingHttpHeaders, setLine: (line: string) => void): Promise<void> {
  const { status, body } = answer;
  const record = writer.record;
  const read = await readWhole(body, MAX_TAPPED_JSON_BYTES);
  if (read.kind === 'failed') {
    // The client left (the exchange's abort destroyed the body), the shutdown ended it, or the upstream broke off.
    writer.fail(writer.endedBy ?? midStreamError(read.error));
    return;
  }
  if (read.kind === 'too-large') {
    writer.head(status, headers, false);
    for (const chunk of read.chunks) writer.response.write(chunk);
    record.bytes += read.bytes;
    // The rest as it comes (the source was paused at the limit); a copy this large is not read for usage, as relayJson's.
    const relayed = relay(body, writer.response);
    body.resume();
    const end = await relayed;
    record.bytes += end.bytes;
    if (end.kind === 'client-closed') writer.relayLeft(body);
    else if (end.kind === 'failed') writer.cutWithError(writer.endedBy ?? midStreamError(end.error));
    else {
      writer.response.end();
      if (hasUsageHooks(forwarded, writer.route.options.hooks.onUsage)) {
        reportUsageLater({ forwarded, appUsage: writer.route.options.hooks.onUsage, status, streamed: false, source: undefined, log: writer.request.log });
      }
    }
    return;
  }
  const bytes = read.chunks.length === 1 ? read.chunks[0]! : Buffer.concat(read.chunks, read.bytes);
  let found: UsageFound | undefined;
  let unread: unknown;
  try {
    const text = bytes.toString('utf8');
    found = usageOfJsonText(text, writer.route.format.usage) ?? extractUsage(JSON.parse(text), writer.route.format.usage);
  } catch (error) {
    unread = error;
  }
  record.server = serverTimesOf(found?.timings);
  const line = compactorLine(forwarded.report, record.server);
  if (line !== undefined) setLine(line);
  // The length of what is sent, whatever the upstream framed it with.
  headers['content-length'] = String(bytes.length);
  writer.head(status, headers, false);
  record.bytes += bytes.length;
  writer.response.end(bytes);
  if (!hasUsageHooks(forwarded, writer.route.options.hooks.onUsage)) return;
  // An answer that is not JSON fails the usage hooks (logged), as relayJson's copy does.
  const source: UsageSource = found === undefined ? { usageFound: () => { throw unread; } } : { usageFound: () => found };
  reportUsageLater({ forwarded, appUsage: writer.route.options.hooks.onUsage, status, streamed: false, source, log: writer.request.log });
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
