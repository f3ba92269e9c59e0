import { extractUsage, type UsageFound, type UsageWords } from './usage.js';

/**
 * The format's usage and llama-server's `timings` read from a JSON answer's
 * text without parsing the whole answer: each is the object after the last
 * `"usage"` (the format's usage key) / `"timings"` key (OpenAI and
 * llama-server write them after the choices), parsed alone.
 * Inside a JSON string a quote is always escaped, so an unescaped `"usage"`
 * followed by `:` is a key. Undefined when neither is found whole this way
 * or a key is there but not read whole (the caller then parses the answer as
 * a whole, which also tells a non-JSON answer apart).
 *
 * @example
 * usageOfJsonText('{"choices":[],"usage":{"prompt_tokens":25}}', chatWords) // → { usage: { prompt_tokens: 25 } }
 */
export function usageOfJsonText(text: string, words: UsageWords): UsageFound | undefined {
  const usage = objectAfterKey(text, words.key);
  const timings = objectAfterKey(text, 'timings');
  // A key named but not read whole here (a value "usage", an object cut short): the whole answer decides.
  if (usage === undefined || timings === undefined || (usage === null && timings === null)) return undefined;
  try {
    const value: Record<string, unknown> = {};
    if (usage !== null) value[words.key] = JSON.parse(usage);
    if (timings !== null) value['timings'] = JSON.parse(timings);
    return extractUsage(value, words);
  } catch {
    return undefined;
  }
}

/** The text of the object value of the last `"key":` in `text`; null when the key is not there; undefined when it is there but not as a key of an object closed in the text. */
function objectAfterKey(text: string, key: string): string | null | undefined {
  const quoted = `"${key}"`;
  const at = text.lastIndexOf(quoted);
  if (at === -1) return null;
  if (at === 0 || text[at - 1] === '\\') return undefined;
  let index = skipSpace(text, at + quoted.length);
  if (text[index] !== ':') return undefined;
  index = skipSpace(text, index + 1);
  if (text[index] !== '{') return undefined;
  const end = closingBrace(text, index);
  return end === -1 ? undefined : text.slice(index, end + 1);
}

function skipSpace(text: string, from: number): number {
  let index = from;
  while (index < text.length && (text[index] === ' ' || text[index] === '\n' || text[index] === '\r' || text[index] === '\t')) index++;
  return index;
}

/** Where the object opened at `open` closes, strings and nested objects skipped; -1 when it does not close. */
function closingBrace(text: string, open: number): number {
  let depth = 0;
  let inString = false;
  for (let index = open; index < text.length; index++) {
    const char = text.charCodeAt(index);
    if (inString) {
      if (char === 0x5c) index++;
      else if (char === 0x22) inString = false;
    } else if (char === 0x22) inString = true;
    else if (char === 0x7b) depth++;
    else if (char === 0x7d && --depth === 0) return index;
  }
  return -1;
}
