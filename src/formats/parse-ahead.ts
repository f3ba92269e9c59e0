import { type BodyScan, SCAN_SLICE_BYTES, type ScanBounds, scanBody } from './body-scan.js';
import { MAX_NESTING_DEPTH, parseBody } from './json-body.js';
import { type Slicing, parseInSlices } from './sliced-parse.js';

/**
 * A large body parsed ahead of its read, the event loop turning between
 * pieces (issue 21 item 2). `JSON.parse` of a whole 32 MiB body holds the
 * loop for as long as it runs (hundreds of milliseconds on a busy machine),
 * and so do decoding it to one string and the prototype-key tests over it.
 * Here the body is scanned first (body-scan.ts: a body past
 * `limits.max_items` is refused before any parse), then its conversation
 * list is parsed element by element, a turn of the loop after every MiB, and
 * the rest of the body, with an empty list in the conversation's place, in
 * slices too (sliced-parse.ts: any object or array over a slice is parsed
 * member by member, at any depth; issue 34 item 2). A body past
 * `limits.max_items` or `limits.max_values` is refused by the scan, before
 * any parse. The parts parse to what the whole would, since a JSON value
 * parses alone to what it is within the body. The result rides in the
 * read's input (wire-format.ts `ReadInput`), and the read takes it rather
 * than parsing again; whatever this cannot follow (not an object, no list,
 * too deep, or any piece refused), the whole-body parse reads and refuses in
 * its own words.
 */

/** From this size on a body is parsed ahead; smaller ones parse in a few milliseconds at most. */
export const PARSE_AHEAD_BYTES = 1024 * 1024;

const EMPTY_LIST = Buffer.from('[]');
const BYTE_ORDER_MARK = Buffer.from([0xef, 0xbb, 0xbf]);

/**
 * A body parsed ahead, and where its pieces lie in the client's bytes: a
 * body written back after a repair copies the client's own bytes of every
 * element it kept (chat/write.ts, messages/write.ts) rather than serializing
 * 32 MiB again. Elements are known by identity: the passes over messages
 * never change one in place (they make a new one, which is serialized).
 */
export class ParsedAhead {
  /** The bytes it was parsed from: what it says holds for those bytes only. */
  readonly raw: Buffer;
  readonly body: Record<string, unknown>;
  /** Where the conversation list lies: from its `[` to just past its `]`; undefined for a body with none (parsed in slices all the same). */
  readonly list: { readonly start: number; readonly end: number } | undefined;
  readonly #elements: ReadonlyMap<object, readonly [start: number, end: number]>;

  constructor(raw: Buffer, body: Record<string, unknown>, list: { readonly start: number; readonly end: number } | undefined, elements: ReadonlyMap<object, readonly [number, number]>) {
    this.raw = raw;
    this.body = body;
    this.list = list;
    this.#elements = elements;
  }

  /** The client's own bytes of `element` (an element of the list, or a content block of a large one), when it was parsed here from `raw`. */
  bytesOf(element: object, raw: Buffer): Buffer | undefined {
    const span = this.#elements.get(element);
    return span === undefined || raw !== this.raw ? undefined : raw.subarray(span[0], span[1]);
  }
}

/** A scan made while the body arrived (http/edge/body-receiver.ts): its result, or the refusal it met. */
export interface ScannedOnArrival {
  readonly bytes: Buffer;
  readonly listKey: string;
  readonly scan: BodyScan | Error;
}

/**
 * Scans and parses `raw` ahead when it is a large body; throws a
 * TooManyItemsError past `maxItems`. `listKey` names the conversation
 * (`messages`, or `input` for the Responses API); `pause` is the caller's
 * turn of the event loop (formats/ does no I/O of its own). A scan made on
 * arrival, of these bytes for this key, is taken rather than made again (its
 * refusal thrown). Undefined for an ordinary body, or one the whole-body
 * parse must read: for an ordinary body (under PARSE_AHEAD_BYTES, within
 * `maxValues`) at once, not as a promise, so its request's read does not
 * wait a turn of the microtask queue for nothing (issue 40).
 */
export function parseAhead(raw: unknown, listKey: string, bounds: ScanBounds, pause: () => Promise<unknown>, arrival?: ScannedOnArrival | null): Promise<ParsedAhead | undefined> | undefined {
  if (!Buffer.isBuffer(raw)) return undefined;
  const scanned = arrival?.bytes === raw && arrival.listKey === listKey ? arrival.scan : undefined;
  if (scanned instanceof Error) return Promise.reject(scanned);
  if (raw.length < PARSE_AHEAD_BYTES) {
    // A body of n bytes holds at most n / 2 + 1 values (`[0,0,…]`): under the default bound a small body needs no scan.
    if (raw.length / 2 + 1 > bounds.maxValues) return scanBody(raw, listKey, { maxItems: Number.POSITIVE_INFINITY, maxValues: bounds.maxValues }, pause).then(() => undefined);
    return undefined;
  }
  return parseLarge(raw, scanned, listKey, bounds, pause);
}

async function parseLarge(raw: Buffer, scanned: BodyScan | undefined, listKey: string, bounds: ScanBounds, pause: () => Promise<unknown>): Promise<ParsedAhead | undefined> {
  const scan = scanned ?? (await scanBody(raw, listKey, bounds, pause));
  if (!scan.followed || scan.depth > MAX_NESTING_DEPTH) return undefined;
  // A byte order mark is refused by the whole-body parse (json-body.ts).
  if (raw.subarray(0, 3).equals(BYTE_ORDER_MARK)) return undefined;
  // No conversation list (none, or not a list: a Responses `input` string, or a body the read refuses): the whole body in slices,
  // not one JSON.parse of all of it (issue 34: a large body with no list was parsed whole).
  if (scan.list === undefined) return parseWithoutList(raw, pause);
  return parseInPieces(raw, scan, listKey, pause);
}

async function parseWithoutList(raw: Buffer, pause: () => Promise<unknown>): Promise<ParsedAhead | undefined> {
  try {
    const body = await parseInSlices(raw, slicingOf(pause));
    if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
    return new ParsedAhead(raw, body as Record<string, unknown>, undefined, new Map());
  } catch {
    return undefined;
  }
}

const slicingOf = (pause: () => Promise<unknown>): Slicing => ({ sliceBytes: SCAN_SLICE_BYTES, pause });

/** Where each element parsed lies in the body, by identity. */
type ElementSpans = Map<object, readonly [number, number]>;

/** Where each element of the list lies: between `[`, the list's commas and `]` (offsets in `raw`). */
function elementBounds(raw: Buffer, scan: BodyScan): Array<[number, number]> {
  const { start, end } = scan.list!;
  const edges = [start, ...scan.commas, end - 1];
  const bounds: Array<[number, number]> = [];
  for (let index = 0; index + 1 < edges.length; index++) bounds.push([edges[index]! + 1, edges[index + 1]!]);
  // `[ ]`: no element (a lone blank between the brackets is not one).
  if (bounds.length === 1 && raw.toString('latin1', bounds[0]![0], bounds[0]![1]).trim() === '') return [];
  return bounds;
}

async function parseInPieces(raw: Buffer, scan: BodyScan, listKey: string, pause: () => Promise<unknown>): Promise<ParsedAhead | undefined> {
  const { start, end } = scan.list!;
  try {
    const top = await parseInSlices(Buffer.concat([raw.subarray(0, start), EMPTY_LIST, raw.subarray(end)]), slicingOf(pause));
    if (typeof top !== 'object' || top === null || Array.isArray(top)) return undefined;
    const body = top as Record<string, unknown>;
    if (!Array.isArray(body[listKey])) return undefined;
    const spans: ElementSpans = new Map();
    body[listKey] = await parseElements(raw, 0, elementBounds(raw, scan), pause, true, spans);
    return new ParsedAhead(raw, body, scan.list!, spans);
  } catch {
    return undefined;
  }
}

/**
 * The elements at `bounds` of `piece` (which starts at `offset` in `raw`),
 * each parsed alone, a turn of the loop after every MiB. One over
 * `PARSE_AHEAD_BYTES` (a Messages turn of 30 MiB of results) has its own
 * `content` list parsed the same way, when `deeper`. Throws what a piece's
 * parse throws.
 */
async function parseElements(raw: Buffer, offset: number, bounds: ReadonlyArray<readonly [number, number]>, pause: () => Promise<unknown>, deeper: boolean, spans: ElementSpans): Promise<unknown[]> {
  const list: unknown[] = [];
  let sincePause = 0;
  for (const [from, to] of bounds) {
    const large = to - from >= PARSE_AHEAD_BYTES;
    const element = !large
      ? parseBody(raw.toString('utf8', offset + from, offset + to))
      : deeper
        ? await parseLargeElement(raw, offset + from, offset + to, pause, spans)
        : await parseInSlices(raw.subarray(offset + from, offset + to), slicingOf(pause));
    if (typeof element === 'object' && element !== null) spans.set(element, [offset + from, offset + to]);
    list.push(element);
    sincePause += large ? 0 : to - from;
    if (sincePause >= SCAN_SLICE_BYTES) {
      sincePause = 0;
      await pause();
    }
  }
  return list;
}

/**
 * One large element of the conversation: scanned for its own `content` list
 * (body-scan.ts, a slice at a time), parsed with `[]` in the list's place,
 * then the list's blocks one by one. An element the scan cannot follow, or
 * whose content is not a list, is parsed whole.
 */
async function parseLargeElement(raw: Buffer, start: number, end: number, pause: () => Promise<unknown>, spans: ElementSpans): Promise<unknown> {
  const piece = raw.subarray(start, end);
  // Counted already, with the whole body.
  const scan = await scanBody(piece, 'content', { maxItems: Number.POSITIVE_INFINITY, maxValues: Number.POSITIVE_INFINITY }, pause);
  if (!scan.followed || scan.list === undefined) return parseInSlices(piece, slicingOf(pause));
  const outer = await parseInSlices(Buffer.concat([piece.subarray(0, scan.list.start), EMPTY_LIST, piece.subarray(scan.list.end)]), slicingOf(pause));
  if (typeof outer !== 'object' || outer === null || Array.isArray(outer) || !Array.isArray((outer as Record<string, unknown>)['content'])) {
    return parseInSlices(piece, slicingOf(pause));
  }
  await pause();
  (outer as Record<string, unknown>)['content'] = await parseElements(raw, start, elementBounds(piece, scan), pause, false, spans);
  return outer;
}
