import { setImmediate as nextTurnOfTheEventLoop } from 'node:timers/promises';
import { PARSE_AHEAD_BYTES, type PairMode, type ParsedAhead, type ReadRequest, type ScannedOnArrival, type WireFormat, parseAhead } from '../../formats/registry.js';
import { type Slices, runInSlices, runNow } from '../../transcript/slices.js';
import type { RequestMode } from './request-mode.js';

/**
 * The first step of a chat exchange, pure: the client's bytes read once by
 * the route's wire format (parse, validate, tool-call pairs) into the chat
 * view the planner works on. `/v1/compact` reads its body the same way.
 */

export interface ExchangeRead {
  /** The chat view, pairs handled; it carries what parse-ahead found to its write-back (ReadRequest.bytesFor). */
  readonly request: ReadRequest;
  /** The bytes the client sent; forwarded as they are when nothing changes the body. */
  readonly raw: Buffer;
  /** Observe mode forwards exactly what the client sent: pairs are checked and reported, never repaired or refused. */
  readonly observing: boolean;
}

export interface ReadSettings {
  readonly format: WireFormat;
  /** `pairs:` in the configuration. */
  readonly pairs: PairMode;
  readonly observing: boolean;
  /** `limits.max_items`: the planning work a request may cost. */
  readonly maxItems: number;
  /** `limits.max_values`: the JSON values a body may hold, counted before any parse. */
  readonly maxValues: number;
}

/**
 * The body read. A large one is first scanned and parsed a piece at a time,
 * the event loop turning between pieces (src/formats/parse-ahead.ts): past
 * `limits.max_items` it is refused before any parse. Then its read (the
 * view, the pair check) runs a slice of items at a time, the loop turning
 * between slices; an ordinary body is read at once, with no pause. A
 * large body scanned as it arrived (`arrival`, http/edge/body-receiver.ts)
 * is not scanned again, and a refusal its scan met is thrown first.
 * An ordinary body's read is returned as it is, not as a promise: nothing
 * in it waits, and an `await` would cost its request a turn of the
 * microtask queue and a suspended frame (issue 40).
 */
export function readExchange(settings: ReadSettings, body: unknown, contentType: string | undefined, arrival?: ScannedOnArrival | null): ExchangeRead | Promise<ExchangeRead> {
  const { maxItems, maxValues } = settings;
  const parsing = parseAhead(body, settings.format.listKey, { maxItems, maxValues }, nextTurnOfTheEventLoop, arrival);
  const large = Buffer.isBuffer(body) && body.length >= PARSE_AHEAD_BYTES;
  if (parsing === undefined && !large) return { request: runNow(readSteps(settings, body, contentType, undefined)), raw: body as Buffer, observing: settings.observing };
  return readLarge(settings, body, contentType, parsing, large);
}

async function readLarge(settings: ReadSettings, body: unknown, contentType: string | undefined, parsing: Promise<ParsedAhead | undefined> | undefined, large: boolean): Promise<ExchangeRead> {
  const steps = readSteps(settings, body, contentType, await parsing);
  const request = large ? await runInSlices(steps, nextTurnOfTheEventLoop) : runNow(steps);
  return { request, raw: body as Buffer, observing: settings.observing };
}

function readSteps(settings: ReadSettings, body: unknown, contentType: string | undefined, parsedAhead: ParsedAhead | undefined): Slices<ReadRequest> {
  const { format, pairs, observing, maxItems } = settings;
  return format.read({ raw: body, contentType, pairs, observe: observing, maxItems, parsedAhead });
}

/**
 * The read settings of one request whose mode (`x-compactor-mode`) may
 * differ from the configuration's: observe checks pairs without repairing
 * them, off leaves them alone.
 */
export function readSettingsFor(settings: ReadSettings, mode: RequestMode, pairs: PairMode): ReadSettings {
  const observing = mode === 'observe';
  const wanted: PairMode = mode === 'off' ? 'off' : pairs;
  return observing === settings.observing && wanted === settings.pairs ? settings : { ...settings, observing, pairs: wanted };
}
