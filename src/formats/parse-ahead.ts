import { type BodyScan, SCAN_SLICE_BYTES, scanBody } from './body-scan.js';
import { MAX_NESTING_DEPTH, parseBody, rememberParsedAhead } from './json-body.js';

/**
 * A large body parsed ahead of its read, the event loop turning between
 * pieces (issue 21 item 2). `JSON.parse` of a whole 32 MiB body holds the
 * loop for as long as it runs (hundreds of milliseconds on a busy machine),
 * and so do decoding it to one string and the prototype-key tests over it.
 * Here the body is scanned first (body-scan.ts: a body past
 * `limits.max_items` is refused before any parse), then its conversation
 * list is parsed element by element, a turn of the loop after every MiB, and
 * the rest of the body, with an empty list in the conversation's place, in
 * one parse. The parts parse to what the whole would, since a JSON value
 * parses alone to what it is within the body. readJsonObject() takes the
 * result; whatever this cannot follow (not an object, no list, too deep, or
 * any piece refused), the whole-body parse reads and refuses in its own words.
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
export async function parseAhead(raw: unknown, listKey: string, maxItems: number, pause: () => Promise<unknown>): Promise<void> {
  if (!Buffer.isBuffer(raw) || raw.length < PARSE_AHEAD_BYTES) return;
  const scan = await scanBody(raw, listKey, maxItems, pause);
  if (!scan.followed || scan.list === undefined || scan.depth > MAX_NESTING_DEPTH) return;
  // A byte order mark is refused by the whole-body parse (json-body.ts).
  if (raw.subarray(0, 3).equals(BYTE_ORDER_MARK)) return;
  const parsed = await parseInPieces(raw, scan, listKey, pause);
  if (parsed !== undefined) rememberParsedAhead(raw, parsed);
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

/** Where each element of the list lies: between `[`, the list's commas and `]`. */
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
    const top = parseBody(Buffer.concat([raw.subarray(0, start), EMPTY_LIST, raw.subarray(end)]).toString('utf8'));
    if (typeof top !== 'object' || top === null || Array.isArray(top)) return undefined;
    const body = top as Record<string, unknown>;
    if (!Array.isArray(body[listKey])) return undefined;
    const list: unknown[] = [];
    let sincePause = 0;
    for (const [from, to] of elementBounds(raw, scan)) {
      const element = parseBody(raw.toString('utf8', from, to));
      if (typeof element === 'object' && element !== null) elementBytes.set(element, { raw, start: from, end: to });
      list.push(element);
      sincePause += to - from;
      if (sincePause >= SCAN_SLICE_BYTES) {
        sincePause = 0;
        await pause();
      }
    }
    body[listKey] = list;
    listSpans.set(raw, scan.list!);
    return body;
  } catch {
    return undefined;
  }
}
