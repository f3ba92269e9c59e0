/**
 * Reading JSON's structure from its bytes, shared by the scan before a parse
 * (body-scan.ts) and the splice after it (splice.ts). Every byte the
 * structure depends on (quotes, backslashes, brackets, commas, colons,
 * whitespace) is ASCII, and UTF-8 never uses an ASCII byte inside a
 * multi-byte character, so no decoding is needed.
 */

export const QUOTE = 0x22;
export const BACKSLASH = 0x5c;
export const OPEN_BRACE = 0x7b;
export const CLOSE_BRACE = 0x7d;
export const OPEN_BRACKET = 0x5b;
export const CLOSE_BRACKET = 0x5d;
export const COMMA = 0x2c;
export const COLON = 0x3a;

export function isWhitespace(byte: number | undefined): boolean {
  return byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
}

/** The position just past the string whose opening quote is at `position` (the body's length when it never closes). */
export function skipString(bytes: Buffer, position: number): number {
  const quote = closingQuote(bytes, position + 1);
  return quote === -1 ? bytes.length : quote + 1;
}

/**
 * The position of the first quote in `bytes` at or after `from` that is not
 * escaped, or -1: a string's closing quote, searched for from just past its
 * opening one. A body still arriving is given as a view of what came
 * (body-scan.ts), and a search left at -1 may go on from the view's end once
 * more bytes came: whether a quote is escaped is read from the bytes before it.
 */
export function closingQuote(bytes: Buffer, from: number): number {
  let quote = bytes.indexOf(QUOTE, from);
  for (;;) {
    // Only a body that is not JSON (or not all here yet) lacks the closing quote; stopping at the end keeps every loop finite.
    if (quote === -1) return -1;
    // A quote preceded by an odd number of backslashes is escaped.
    let backslashes = 0;
    while (bytes[quote - 1 - backslashes] === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return quote;
    quote = bytes.indexOf(QUOTE, quote + 1);
  }
}

/** Whether the key string at `start`…`end` (quotes included) is `quoted`, however it is escaped. */
export function keyIs(bytes: Buffer, start: number, end: number, quoted: Buffer): boolean {
  if (end - start === quoted.length) {
    // Byte by byte: keys are short, and a native compare per key cost more than the scan around it (issue 34).
    for (let index = 0; index < quoted.length; index++) if (bytes[start + index] !== quoted[index]) return false;
    return true;
  }
  // `"m\u0065ssages"` is the same key to JSON.parse: only an escaped key can be longer and still say it.
  // Searched within the key only: a search to the body's end made each top-level key cost the whole body (quadratic).
  if (end - start < quoted.length || !bytes.subarray(start, end).includes(BACKSLASH)) return false;
  try {
    return JSON.parse(bytes.toString('utf8', start, end)) === quoted.toString('utf8', 1, quoted.length - 1);
  } catch {
    // The scan runs before any parse: a key that is not valid JSON is simply not this one.
    return false;
  }
}
