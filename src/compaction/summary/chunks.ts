import { splitsSurrogatePair } from '../../transcript/text.js';

/**
 * Splitting a rendered transcript into chunks that fit a prepend-mode
 * request, for folding (`s1 = S(c1)`, `sk = S(sk−1 + ck)`).
 */

/**
 * Splits rendered messages into chunks whose text fits `chunkTokens`, at
 * message boundaries; a single message larger than that is split by
 * characters (never inside a surrogate pair).
 */
export function chunkTranscript(rendered: readonly string[], chunkTokens: number, tokensOf: (text: string) => number): string[] {
  const chunks: string[] = [];
  const joined = (start: number, end: number): string => rendered.slice(start, end).join('\n\n');
  const fits = (start: number, end: number): boolean => tokensOf(joined(start, end)) <= chunkTokens;
  for (let start = 0; start < rendered.length; ) {
    const text = rendered[start]!;
    if (tokensOf(text) > chunkTokens) {
      // One message larger than a chunk: cut it into the longest pieces that fit by the same measure.
      // (Pieces of proportional length do not: bytes are not spread evenly over characters, and the
      // measure may add a fixed cost to every piece.)
      for (let at = 0; at < text.length; ) {
        const end = pieceEnd(text, at, chunkTokens, tokensOf);
        chunks.push(text.slice(at, end));
        at = end;
      }
      start++;
      continue;
    }
    // The most messages from `start` that fit one chunk: doubling the count while they fit, then
    // bisecting, so a chunk costs a few measures of its own length. Measuring the chunk again after
    // each message added was quadratic: 50,000 short messages blocked the event loop for seconds.
    let good = start + 1;
    let bad = rendered.length + 1;
    for (let count = 2; good < rendered.length; count *= 2) {
      const end = Math.min(rendered.length, start + count);
      if (!fits(start, end)) {
        bad = end;
        break;
      }
      good = end;
    }
    while (bad - good > 1) {
      const middle = Math.floor((good + bad) / 2);
      if (fits(start, middle)) good = middle;
      else bad = middle;
    }
    chunks.push(joined(start, good));
    start = good;
  }
  return chunks;
}

/**
 * The end of the longest piece of `text` from `start` that fits `chunkTokens`:
 * doubling the length while it fits, then bisecting, so a piece costs a few
 * measures of its own length. Never ends between the halves of a surrogate
 * pair, and always takes at least one character.
 */
function pieceEnd(text: string, start: number, chunkTokens: number, tokensOf: (text: string) => number): number {
  const fits = (end: number): boolean => tokensOf(text.slice(start, end)) <= chunkTokens;
  let good = start;
  let bad = text.length + 1;
  for (let length = 1; ; length *= 2) {
    const end = Math.min(text.length, start + length);
    if (!fits(end)) {
      bad = end;
      break;
    }
    good = end;
    if (end === text.length) break;
  }
  while (bad - good > 1) {
    const middle = Math.floor((good + bad) / 2);
    if (fits(middle)) good = middle;
    else bad = middle;
  }
  if (good === start) good = start + 1;
  // A pair that does not fit after its first half is taken whole when it is all the piece holds.
  if (splitsSurrogatePair(text, good)) good = good - 1 > start ? good - 1 : good + 1;
  return good;
}
