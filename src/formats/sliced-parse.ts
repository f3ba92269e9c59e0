import { InvalidRequestError } from '../errors.js';
import { CLOSE_BRACE, CLOSE_BRACKET, COLON, COMMA, OPEN_BRACE, OPEN_BRACKET, QUOTE, isWhitespace, skipString } from './json-bytes.js';
import { parseBody } from './json-body.js';

/**
 * Any JSON value parsed with the event loop turning at least every
 * `sliceBytes` (issue 34 item 2): a value smaller than a slice is one
 * `JSON.parse`; a larger object or array is split into its members, each
 * parsed the same way, and put together as `JSON.parse` would (a later
 * duplicate key wins, in the first one's place). 28.6 MiB of empty objects
 * beside the messages were parsed at once (13 s of a held loop, 1.7 GB).
 * The bytes are read as body-scan.ts reads them (json-bytes.ts); whatever
 * this cannot follow throws, and the caller leaves the body to the
 * whole-body parse, which refuses it in its own words.
 */

export interface Slicing {
  readonly sliceBytes: number;
  /** The caller's turn of the event loop. */
  readonly pause: () => Promise<unknown>;
}

/** Bytes parsed or scanned since the last pause, shared by every level of one parse. */
interface Progress {
  since: number;
}

async function progressed(slicing: Slicing, progress: Progress, bytes: number): Promise<void> {
  progress.since += bytes;
  if (progress.since < slicing.sliceBytes) return;
  progress.since = 0;
  await slicing.pause();
}

/** The value in `bytes` (white space around it allowed), parsed a slice at a time. */
export async function parseInSlices(bytes: Buffer, slicing: Slicing): Promise<unknown> {
  return parseValue(bytes, 0, bytes.length, slicing, { since: 0 });
}

async function parseValue(bytes: Buffer, start: number, end: number, slicing: Slicing, progress: Progress): Promise<unknown> {
  if (end - start < slicing.sliceBytes) {
    const value = parseBody(bytes.toString('utf8', start, end));
    await progressed(slicing, progress, end - start);
    return value;
  }
  let open = start;
  while (open < end && isWhitespace(bytes[open])) open++;
  const first = bytes[open];
  // A long string or number: one parse (a string is copied, not built of parts).
  if (first !== OPEN_BRACE && first !== OPEN_BRACKET) return parseValue(bytes, start, end, { ...slicing, sliceBytes: Number.POSITIVE_INFINITY }, progress);
  const members = await membersOf(bytes, open, end, slicing, progress);
  const isList = first === OPEN_BRACKET;
  const list: unknown[] = [];
  const object: Record<string, unknown> = {};
  const put = (key: unknown, value: unknown): void => {
    if (isList) return void list.push(value);
    if (typeof key !== 'string') throw notFollowed();
    // What the whole-body parse refuses (json-body.ts) is refused there, in its words.
    if (key === '__proto__' || (key === 'constructor' && typeof value === 'object' && value !== null && Object.hasOwn(value, 'prototype'))) throw notFollowed();
    object[key] = value;
  };
  // Neighbouring small members are parsed together, up to a slice: one JSON.parse per member would cost more than the parse.
  let run: { from: number; to: number } | undefined;
  const flush = async (): Promise<void> => {
    if (run === undefined) return;
    const text = `${isList ? '[' : '{'}${bytes.toString('utf8', run.from, run.to)}${isList ? ']' : '}'}`;
    const parsed = parseBody(text);
    run = undefined;
    if (isList) for (const value of parsed as unknown[]) list.push(value);
    else for (const [key, value] of Object.entries(parsed as Record<string, unknown>)) put(key, value);
    await progressed(slicing, progress, text.length);
  };
  for (let index = 0; index < members.length; index += 3) {
    const from = members[index]!;
    const colon = members[index + 1]!;
    const to = members[index + 2]!;
    if (to - from >= slicing.sliceBytes) {
      await flush();
      const key = isList ? undefined : parseBody(bytes.toString('utf8', from, colon));
      put(key, await parseValue(bytes, isList ? from : colon + 1, to, slicing, progress));
      continue;
    }
    if (run !== undefined && to - run.from >= slicing.sliceBytes) await flush();
    run = run === undefined ? { from, to } : { from: run.from, to };
  }
  await flush();
  return isList ? list : object;
}

/**
 * The members of the object or array opening at `open`, which must close at
 * the last non-blank byte before `end`: three numbers each (flat, not an
 * object per member: a list may hold millions), where it starts, its colon
 * (an array's: -1) and its end.
 */
async function membersOf(bytes: Buffer, open: number, end: number, slicing: Slicing, progress: Progress): Promise<number[]> {
  const isObject = bytes[open] === OPEN_BRACE;
  const members: number[] = [];
  let from = open + 1;
  let colon = -1;
  let depth = 0;
  let closed = -1;
  const add = (to: number): void => {
    if (isObject && colon === -1) throw notFollowed();
    members.push(from, isObject ? colon : -1, to);
  };
  let scannedAt = open;
  for (let position = open; position < end; position++) {
    if (position - scannedAt >= slicing.sliceBytes) {
      await progressed(slicing, progress, position - scannedAt);
      scannedAt = position;
    }
    const byte = bytes[position]!;
    if (byte === QUOTE) {
      position = skipString(bytes, position) - 1;
      continue;
    }
    if (byte === OPEN_BRACE || byte === OPEN_BRACKET) depth++;
    else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) {
      if (--depth === 0) {
        closed = position;
        break;
      }
    } else if (depth === 1 && byte === COLON && isObject && colon === -1) colon = position;
    else if (depth === 1 && byte === COMMA) {
      add(position);
      from = position + 1;
      colon = -1;
    }
  }
  if (closed === -1 || bytes[closed] !== (isObject ? CLOSE_BRACE : CLOSE_BRACKET)) throw notFollowed();
  for (let after = closed + 1; after < end; after++) if (!isWhitespace(bytes[after])) throw notFollowed();
  // `[ ]` and `{ }`: no member (a lone blank between the brackets is not one).
  const blank = (): boolean => {
    for (let position = from; position < closed; position++) if (!isWhitespace(bytes[position])) return false;
    return true;
  };
  if (!(members.length === 0 && blank())) add(closed);
  return members;
}

/** Thrown where the pieces do not make one JSON value: the caller falls back to the whole-body parse. */
function notFollowed(): Error {
  return new InvalidRequestError({ code: 'invalid_json', message: 'the request body is not valid JSON' });
}
