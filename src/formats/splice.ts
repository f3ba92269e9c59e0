/**
 * A rewritten `messages` put back into the client's own bytes: every other
 * field goes upstream exactly as the client wrote it. Parsing and
 * re-serializing the whole body would change them: `JSON.parse` rounds a
 * `seed` of 18446744073709551615 to 18446744073709552000 and turns `-1e400`
 * into `null` (−Infinity), and it drops duplicate keys, spacing and escapes.
 *
 * The scanner reads bytes (json-bytes.ts). It expects a body that
 * `JSON.parse` already accepted, so it checks nothing.
 */
import { BACKSLASH, CLOSE_BRACE, CLOSE_BRACKET, COLON, COMMA, OPEN_BRACE, OPEN_BRACKET, QUOTE, isWhitespace, keyIs, skipString } from './json-bytes.js';

const MESSAGES_KEY = Buffer.from('"messages"');
const OPEN_LIST = Buffer.from('[');
const CLOSE_LIST = Buffer.from(']');
const LIST_COMMA = Buffer.from(',');

/** Where a value lies in the bytes: `start` inclusive, `end` exclusive. */
export interface ByteSpan {
  readonly start: number;
  readonly end: number;
}

function skipWhitespace(bytes: Buffer, position: number): number {
  while (isWhitespace(bytes[position])) position++;
  return position;
}

/** The position just past the value (any JSON value) that starts at `position`. */
function skipValue(bytes: Buffer, position: number): number {
  const first = bytes[position];
  if (first === QUOTE) return skipString(bytes, position);
  if (first !== OPEN_BRACE && first !== OPEN_BRACKET) {
    // A number, true, false or null: it runs to the next delimiter.
    while (position < bytes.length) {
      const byte = bytes[position];
      if (byte === COMMA || byte === CLOSE_BRACE || byte === CLOSE_BRACKET || isWhitespace(byte)) break;
      position++;
    }
    return position;
  }
  // An object or a list: count brackets, skipping strings whole (they may hold brackets).
  let depth = 0;
  while (position < bytes.length) {
    const byte = bytes[position];
    if (byte === QUOTE) {
      position = skipString(bytes, position);
      continue;
    }
    if (byte === OPEN_BRACE || byte === OPEN_BRACKET) depth++;
    else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) {
      depth--;
      if (depth === 0) return position + 1;
    }
    position++;
  }
  return position;
}

/**
 * The span of the value of the top-level `messages` key: the last one when
 * the key appears twice, since that is the one `JSON.parse` kept. Keys of the
 * same name inside other fields do not count. `undefined` when the body is
 * not an object or has no such key.
 *
 * @example
 * findMessagesSpan(Buffer.from('{"model":"m","messages":[1]}')) // → { start: 24, end: 27 }
 */
export function findMessagesSpan(bytes: Buffer, quotedKey: Buffer = MESSAGES_KEY): ByteSpan | undefined {
  if (quotedKey !== MESSAGES_KEY) return scanForKey(bytes, quotedKey);
  // A changed body is looked up twice (the known-prefix proof, then the splice): the second costs nothing.
  if (messagesSpans.has(bytes)) return messagesSpans.get(bytes);
  const span = scanForKey(bytes, quotedKey);
  messagesSpans.set(bytes, span);
  return span;
}

/** The `messages` span found in a body, by the body's identity: a body's bytes are never changed in place. */
const messagesSpans = new WeakMap<Buffer, ByteSpan | undefined>();

function scanForKey(bytes: Buffer, quotedKey: Buffer): ByteSpan | undefined {
  const found = scanForMember(bytes, quotedKey);
  return found === undefined ? undefined : { start: found.start, end: found.end };
}

/** The span of the top-level member `quotedKey` (the last one), its key's first byte included as `keyStart`. */
function scanForMember(bytes: Buffer, quotedKey: Buffer): (ByteSpan & { readonly keyStart: number }) | undefined {
  let position = skipWhitespace(bytes, 0);
  if (bytes[position] !== OPEN_BRACE) return undefined;
  let found: (ByteSpan & { keyStart: number }) | undefined;
  position = skipWhitespace(bytes, position + 1);
  while (bytes[position] === QUOTE) {
    const keyStart = position;
    position = skipString(bytes, position);
    const isMessages = keyIs(bytes, keyStart, position, quotedKey);
    position = skipWhitespace(bytes, position);
    if (bytes[position] !== COLON) return found;
    position = skipWhitespace(bytes, position + 1);
    const valueStart = position;
    position = skipValue(bytes, position);
    if (isMessages) found = { keyStart, start: valueStart, end: position };
    position = skipWhitespace(bytes, position);
    if (bytes[position] !== COMMA) break;
    position = skipWhitespace(bytes, position + 1);
  }
  return found;
}

/** The span of the top-level `key`'s value; a validated body always has it, so not finding it is a bug here. */
function spanOfKey(raw: Buffer, key: string): ByteSpan {
  const span = findMessagesSpan(raw, key === 'messages' ? MESSAGES_KEY : Buffer.from(JSON.stringify(key)));
  if (span === undefined) throw new Error(`splice: the body has no top-level "${key}"`);
  return span;
}

/**
 * The client's body without its top-level member `key` (every one of that
 * name: `JSON.parse` kept the last, and an earlier one must not come back
 * into view), its comma with it; every other byte as it was. The body as it
 * came when it has none.
 *
 * @example
 * withoutMember(Buffer.from('{"a":1, "context_management":{}, "b":2}'), 'context_management').toString() // → '{"a":1, "b":2}'
 */
export function withoutMember(raw: Buffer, key: string): Buffer {
  const quoted = Buffer.from(JSON.stringify(key));
  let bytes = raw;
  for (let found = scanForMember(bytes, quoted); found !== undefined; found = scanForMember(bytes, quoted)) {
    const after = skipWhitespace(bytes, found.end);
    let start = found.keyStart;
    let end = found.end;
    if (bytes[after] === COMMA) end = skipWhitespace(bytes, after + 1);
    else {
      // The last member: the comma before it goes.
      let before = start - 1;
      while (before > 0 && isWhitespace(bytes[before])) before--;
      if (bytes[before] === COMMA) start = before;
    }
    bytes = Buffer.concat([bytes.subarray(0, start), bytes.subarray(end)]);
  }
  return bytes;
}

/** The client's body with the value of its top-level `key` replaced by `replacement`; every other byte as it was. */
export function spliceValue(raw: Buffer, key: string, replacement: Buffer): Buffer {
  const span = spanOfKey(raw, key);
  return Buffer.concat([raw.subarray(0, span.start), replacement, raw.subarray(span.end)], span.start + replacement.length + raw.length - span.end);
}

/**
 * The client's body with the value of its top-level `messages` replaced by
 * `messages`, serialized; every other byte as it was.
 *
 * @example
 * spliceMessages(Buffer.from('{"seed":18446744073709551615, "messages":[]}'), [{ role: 'user', content: 'hi' }]).toString()
 * // → '{"seed":18446744073709551615, "messages":[{"role":"user","content":"hi"}]}'
 */
export function spliceMessages(raw: Buffer, messages: unknown): Buffer {
  return spliceValue(raw, 'messages', Buffer.from(JSON.stringify(messages)));
}

/** The spans of the elements of the list whose value lies at `span` (a list `JSON.parse` accepted). */
function elementSpans(bytes: Buffer, span: ByteSpan): ByteSpan[] {
  const spans: ByteSpan[] = [];
  let position = skipWhitespace(bytes, span.start + 1);
  while (position < span.end && bytes[position] !== CLOSE_BRACKET) {
    const end = skipValue(bytes, position);
    spans.push({ start: position, end });
    position = skipWhitespace(bytes, end);
    if (bytes[position] === COMMA) position = skipWhitespace(bytes, position + 1);
  }
  return spans;
}

/**
 * One element of a list written back: the index of the client's own element
 * (its bytes go as they came, never parsed and written again: a number like
 * 9007199254740993 would come back as …992), or a value to serialize.
 */
export type ListEntry = { readonly kept: number } | { readonly value: unknown };

/**
 * The parts of `bytes` with the list at `span` rebuilt from `elements` (each
 * one buffer or the parts of one), commas between; every other byte as it
 * was. Parts, not one buffer: the caller's one concatenation copies each once.
 */
export function listParts(bytes: Buffer, span: ByteSpan, elements: ReadonlyArray<Buffer | readonly Buffer[]>): Buffer[] {
  const parts: Buffer[] = [bytes.subarray(0, span.start), OPEN_LIST];
  elements.forEach((element, index) => {
    if (index > 0) parts.push(LIST_COMMA);
    if (Buffer.isBuffer(element)) parts.push(element);
    // A loop, not a spread: a turn may hold more blocks than a call takes arguments.
    else for (const part of element) parts.push(part);
  });
  parts.push(CLOSE_LIST, bytes.subarray(span.end));
  return parts;
}

/** The client's body with its top-level list at `key` rebuilt from `entries`; every byte of a kept element as it came. */
export function spliceList(raw: Buffer, key: string, entries: readonly ListEntry[]): Buffer {
  const span = spanOfKey(raw, key);
  const elements = elementSpans(raw, span);
  return Buffer.concat(listParts(raw, span, entries.map((entry) => {
    if (!('kept' in entry)) return Buffer.from(JSON.stringify(entry.value));
    const element = elements[entry.kept]!;
    return raw.subarray(element.start, element.end);
  })));
}
