/**
 * Cutting text without breaking a character. JavaScript strings are UTF-16:
 * a character outside the Basic Multilingual Plane (😀, 𝄞, 𠜎) is two code
 * units, a high surrogate then a low one, and a cut between them leaves a
 * lone surrogate, which is not valid Unicode and which `Buffer.from(…, 'utf8')`
 * turns into U+FFFD. Pruning, prompt quoting and summary chunking all cut
 * text by length, so they all ask here where a cut may fall.
 */

/** Whether a UTF-16 code unit is the first half of a surrogate pair (U+D800–U+DBFF). */
export function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

/** Whether a UTF-16 code unit is the second half of a surrogate pair (U+DC00–U+DFFF). */
export function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}

/**
 * Whether cutting `text` at `index` would separate the two halves of a
 * surrogate pair: a high surrogate just before `index` and a low one at it.
 * A lone surrogate already in the text is no pair, so a cut next to it splits
 * nothing.
 *
 * @example
 * splitsSurrogatePair('a😀b', 2) // → true (between the halves of 😀)
 * splitsSurrogatePair('a😀b', 1) // → false
 */
export function splitsSurrogatePair(text: string, index: number): boolean {
  return (
    index > 0 &&
    index < text.length &&
    isHighSurrogate(text.charCodeAt(index - 1)) &&
    isLowSurrogate(text.charCodeAt(index))
  );
}

/**
 * The cut at or just before `index` that keeps every surrogate pair whole:
 * `index`, or `index − 1` when `index` falls between the halves of a pair.
 * `text.slice(0, safeCutIndex(text, index))` is then at most `index` code
 * units long and holds no half pair the text did not already hold.
 *
 * @example
 * safeCutIndex('a😀b', 2) // → 1
 * safeCutIndex('a😀b', 3) // → 3
 */
export function safeCutIndex(text: string, index: number): number {
  return splitsSurrogatePair(text, index) ? index - 1 : index;
}
