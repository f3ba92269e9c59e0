import { type BodyScan, SCAN_SLICE_BYTES, type ScanBounds, scanBody } from './body-scan.js';
import { MAX_NESTING_DEPTH, parseBody, rememberParsedAhead } from './json-body.js';
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
 * member by member, at any depth; issue 34 item 2). The parts parse to what
 * the whole would, since a JSON value parses alone to what it is within the
 * body. readJsonObject() takes the result; whatever this cannot follow (not
 * an object, too deep, or any piece refused), the whole-body parse reads and
 * refuses in its own words. A body past `limits.max_items` or
 * `limits.max_values` is refused by the scan, before any parse.
 */

/** From this size on a body is parsed ahead; smaller ones parse in a few milliseconds at most. */
export const PARSE_AHEAD_BYTES = 1024 * 1024;

const EMPTY_LIST = Buffer.from('[]');
const BYTE_ORDER_MARK = Buffer.from([0xef, 0xbb, 0xbf]);

/**
 * Scans and parses `raw` ahead when it is a large body; throws a
 * TooManyItemsError past `maxItems`. `listKey` names the conversation
 * (`messages`, or `input` for the Responses API); `pause` is the caller's
 * turn of the event loop (formats/ does no I/O of its own).
 */
export async function parseAhead(raw: unknown, listKey: string, bounds: ScanBounds, pause: () => Promise<unknown>): Promise<void> {
  if (!Buffer.isBuffer(raw)) return;
  if (raw.length < PARSE_AHEAD_BYTES) {
    // A body of n bytes holds at most n / 2 + 1 values (`[0,0,…]`): under the default bound a small body needs no scan.
    if (raw.length / 2 + 1 > bounds.maxValues) await scanBody(raw, listKey, { maxItems: Number.POSITIVE_INFINITY, maxValues: bounds.maxValues }, pause);
    return;
  }
  const scan = await scanBody(raw, listKey, bounds, pause);
  if (!scan.followed || scan.depth > MAX_NESTING_DEPTH) return;
  // A byte order mark is refused by the whole-body parse (json-body.ts).
  if (raw.subarray(0, 3).equals(BYTE_ORDER_MARK)) return;
  const parsed = scan.list === undefined ? await parsedWhole(raw, pause) : await parseInPieces(raw, scan, listKey, pause);
  if (parsed !== undefined) rememberParsedAhead(raw, parsed);
}

const slicingOf = (pause: () => Promise<unknown>): Slicing => ({ sliceBytes: SCAN_SLICE_BYTES, pause });

/** A body with no conversation list to follow, parsed in slices all the same (undefined: refused later by the whole-body parse). */
async function parsedWhole(raw: Buffer, pause: () => Promise<unknown>): Promise<Record<string, unknown> | undefined> {
  try {
    const body = await parseInSlices(raw, slicingOf(pause));
    return typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Where the elements parsed ahead lie in their body, and where its list
 * lies: a body written back after a repair copies the client's own bytes of
 * every element it kept (chat/write.ts) rather than serializing 32 MiB again.
 * Kept by identity: the passes over messages never change one in place
 * (they make a new one, which is serialized).
 */
const elementBytes = new WeakMap<object, { readonly raw: Buffer; readonly start: number; readonly end: number }>();
const listSpans = new WeakMap<Buffer, { readonly start: number; readonly end: number }>();

/** The client's own bytes of `element` when it was parsed ahead from `raw`. */
export function clientBytesOf(element: object, raw: Buffer): Buffer | undefined {
  const span = elementBytes.get(element);
  return span === undefined || span.raw !== raw ? undefined : raw.subarray(span.start, span.end);
}

/** Where the conversation list of a body parsed ahead lies: from its `[` to just past its `]`. */
export function listSpanOf(raw: Buffer): { readonly start: number; readonly end: number } | undefined {
  return listSpans.get(raw);
}

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

async function parseInPieces(raw: Buffer, scan: BodyScan, listKey: string, pause: () => Promise<unknown>): Promise<Record<string, unknown> | undefined> {
  const { start, end } = scan.list!;
  try {
    const top = await parseInSlices(Buffer.concat([raw.subarray(0, start), EMPTY_LIST, raw.subarray(end)]), slicingOf(pause));
    if (typeof top !== 'object' || top === null || Array.isArray(top)) return undefined;
    const body = top as Record<string, unknown>;
    if (!Array.isArray(body[listKey])) return undefined;
    body[listKey] = await parseElements(raw, 0, elementBounds(raw, scan), pause, true);
    listSpans.set(raw, scan.list!);
    return body;
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
async function parseElements(raw: Buffer, offset: number, bounds: ReadonlyArray<readonly [number, number]>, pause: () => Promise<unknown>, deeper: boolean): Promise<unknown[]> {
  const list: unknown[] = [];
  let sincePause = 0;
  for (const [from, to] of bounds) {
    const large = to - from >= PARSE_AHEAD_BYTES;
    const element = !large
      ? parseBody(raw.toString('utf8', offset + from, offset + to))
      : deeper
        ? await parseLargeElement(raw, offset + from, offset + to, pause)
        : await parseInSlices(raw.subarray(offset + from, offset + to), slicingOf(pause));
    if (typeof element === 'object' && element !== null) elementBytes.set(element, { raw, start: offset + from, end: offset + to });
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
async function parseLargeElement(raw: Buffer, start: number, end: number, pause: () => Promise<unknown>): Promise<unknown> {
  const piece = raw.subarray(start, end);
  // Counted already, with the whole body.
  const scan = await scanBody(piece, 'content', { maxItems: Number.POSITIVE_INFINITY, maxValues: Number.POSITIVE_INFINITY }, pause);
  if (!scan.followed || scan.list === undefined) return parseInSlices(piece, slicingOf(pause));
  const outer = await parseInSlices(Buffer.concat([piece.subarray(0, scan.list.start), EMPTY_LIST, piece.subarray(scan.list.end)]), slicingOf(pause));
  if (typeof outer !== 'object' || outer === null || Array.isArray(outer) || !Array.isArray((outer as Record<string, unknown>)['content'])) {
    return parseInSlices(piece, slicingOf(pause));
  }
  await pause();
  (outer as Record<string, unknown>)['content'] = await parseElements(raw, start, elementBounds(piece, scan), pause, false);
  return outer;
}
