import { InvalidRequestError, UnsupportedMediaTypeError } from '../errors.js';
import { isJsonMediaType, mediaTypeOf } from '../upstream/media-type.js';
import { OPEN_BRACE, isWhitespace } from './json-bytes.js';

/**
 * The first step of every format's read: the client's body parsed once as a
 * JSON object, its bytes kept (they are forwarded as they came when nothing
 * changes), refused in the same words whatever the API: the media type, an
 * empty body, invalid JSON, forbidden keys, nesting, a model name too long.
 */

/**
 * Parses the body. A leading byte order mark is refused: RFC 8259 lets a
 * parser refuse one, and compactor does, since it may forward the raw bytes
 * as they came. Keys that pollute prototypes are refused, found by the
 * walk of {@link checkedTree} (parse-ahead.ts parses a large body's slices
 * with this, and checks their nesting by its own scan).
 */
export function parseBody(text: string): unknown {
  return parseChecked(text, Number.POSITIVE_INFINITY).json;
}

/** The body parsed, prototype keys refused; `tooDeep` when it nests deeper than `limit` (refused by the caller, after its own checks). */
function parseChecked(text: string, limit: number): { json: unknown; tooDeep: boolean } {
  if (text.charCodeAt(0) === 0xfeff) throw invalidJson();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    // The parser's message quotes the body, so it is not passed on (nor logged).
    throw invalidJson();
  }
  const fault = checkedTree(json, limit);
  if (fault === 'forbidden key') {
    throw new InvalidRequestError({ code: 'invalid_body', message: 'the request body uses a forbidden key ("__proto__" or "constructor.prototype")' });
  }
  return { json, tooDeep: fault === 'too deep' };
}

function invalidJson(): InvalidRequestError {
  return new InvalidRequestError({ code: 'invalid_json', message: 'the request body is not valid JSON' });
}

/**
 * How deep a request body may nest. No chat request comes near it (tool
 * schemas nest a few dozen levels at most); Jackson allows 1000 by default,
 * serde_json 128. Deeper bodies are refused because `JSON.stringify` and the
 * prefix hash's canonical JSON recurse, and overflow the stack at a few
 * thousand levels: a 500 for what is a bad request.
 */
export const MAX_NESTING_DEPTH = 512;

/**
 * What is wrong with a body `JSON.parse` accepted, found in one walk
 * (without recursion) that stops at the first fault: a `__proto__` key, or a
 * `constructor` key holding an object with a `prototype` key (either
 * pollutes prototypes when a step merges objects), at any depth, however the
 * key was escaped; and nesting deeper than `limit`. This is the check
 * secure-json-parse makes, done in the walk the depth check needs anyway,
 * rather than by its two regular expressions over the whole text (2.5% of a
 * 200 KB request's CPU, issue 26).
 */
function checkedTree(value: unknown, limit: number): 'forbidden key' | 'too deep' | null {
  // Parallel stacks: objects and arrays still to look into, and the depth of each.
  const nodes: object[] = [];
  const depths: number[] = [];
  const visit = (child: unknown, depth: number): void => {
    if (typeof child === 'object' && child !== null) {
      nodes.push(child);
      depths.push(depth);
    }
  };
  visit(value, 1);
  while (nodes.length > 0) {
    const node = nodes.pop()!;
    const depth = depths.pop()!;
    if (depth > limit) return 'too deep';
    if (Array.isArray(node)) {
      for (const child of node) visit(child, depth + 1);
      continue;
    }
    if (pollutesPrototypes(node)) return 'forbidden key';
    for (const key in node) visit((node as Record<string, unknown>)[key], depth + 1);
  }
  return null;
}

function pollutesPrototypes(node: object): boolean {
  if (Object.hasOwn(node, '__proto__')) return true;
  if (!Object.hasOwn(node, 'constructor')) return false;
  const constructor = (node as { constructor: unknown }).constructor;
  return typeof constructor === 'object' && constructor !== null && Object.hasOwn(constructor, 'prototype');
}

/**
 * The longest `model` accepted. Real names are short (`qwen2.5-coder-32b-instruct-q4_k_m.gguf`,
 * `hf.co/unsloth/Qwen3-Coder-30B-A3B-Instruct-GGUF:Q4_K_XL`: under 64); compactor keeps
 * state per model, and a 16 MB name (60 requests took the process from 88 MB to 2.1 GB)
 * is a client that is not naming a model.
 */
export const MAX_MODEL_NAME_LENGTH = 256;

/**
 * The body as a JSON object, read once whatever the API: the media type,
 * an empty body, invalid JSON, forbidden keys and nesting are refused as
 * for a chat completion.
 */
export function readJsonObject(raw: unknown, contentType: string | undefined): Record<string, unknown> {
  // Any content type is accepted for a body that parses as JSON, as llama-server accepts it
  // (`curl -d` sends JSON as application/x-www-form-urlencoded); what does not parse is refused by its type.
  const declaredOther = contentType !== undefined && !isJsonMediaType(mediaTypeOf(contentType));
  if (!Buffer.isBuffer(raw) || raw.length === 0) {
    if (declaredOther) throw new UnsupportedMediaTypeError(contentType);
    throw new InvalidRequestError({ code: 'invalid_body', message: 'the request body is empty; expected a JSON object' });
  }
  const json = parseWhole(raw, declaredOther ? contentType : undefined);
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new InvalidRequestError({ code: 'invalid_body', message: 'the request body must be a JSON object' });
  }
  return json as Record<string, unknown>;
}

/** The body parsed in one piece, nesting checked; a body of another declared type that was not meant as JSON is refused by its type. */
function parseWhole(raw: Buffer, otherType: string | undefined): unknown {
  let parsed: { json: unknown; tooDeep: boolean };
  try {
    parsed = parseChecked(raw.toString('utf8'), MAX_NESTING_DEPTH);
  } catch (error) {
    if (otherType !== undefined && !startsLikeJson(raw)) throw new UnsupportedMediaTypeError(otherType);
    throw error;
  }
  if (parsed.tooDeep && typeof parsed.json === 'object' && parsed.json !== null && !Array.isArray(parsed.json)) {
    throw new InvalidRequestError({ code: 'invalid_body', message: `the request body nests deeper than ${MAX_NESTING_DEPTH} levels` });
  }
  return parsed.json;
}

/** Whether a body's first character (after white space) opens a JSON object: it was meant as JSON, whatever its type said. */
function startsLikeJson(raw: Buffer): boolean {
  for (const byte of raw) {
    if (isWhitespace(byte)) continue;
    return byte === OPEN_BRACE;
  }
  return false;
}

export function withModelNameChecked<Body extends { model: string }>(body: Body): Body {
  if (body.model.length > MAX_MODEL_NAME_LENGTH) {
    throw new InvalidRequestError({ code: 'invalid_body', message: `model: must be at most ${MAX_MODEL_NAME_LENGTH} characters`, param: 'model' });
  }
  return body;
}

