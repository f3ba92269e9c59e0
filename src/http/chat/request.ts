import type { z } from 'zod';
import { describeType, formatPath } from '../../issue-words.js';
import { describePairProblem, findPairProblems, type PairProblem, repairPairs } from '../../transcript/pairs.js';
import { type ChatRequestBody, ChatRequestSchema, isChatRequestBody } from './planner.js';
import { InvalidRequestError, UnsupportedMediaTypeError } from '../../errors.js';
import { isJsonMediaType, mediaTypeOf } from '../../upstream/media-type.js';

/**
 * Step 1 of the request path: read the chat body once, keep its bytes, and
 * validate it loosely. Step 2: tool-call pairs.
 */

// Fast pre-checks on the text, as secure-json-parse does: only a body that
// mentions a dangerous key is walked.
const PROTO_KEY = /"(?:_|\\u005[Ff])(?:_|\\u005[Ff])(?:p|\\u0070)(?:r|\\u0072)(?:o|\\u006[Ff])(?:t|\\u0074)(?:o|\\u006[Ff])(?:_|\\u005[Ff])(?:_|\\u005[Ff])"\s*:/;
const CONSTRUCTOR_KEY = /"(?:c|\\u0063)(?:o|\\u006[Ff])(?:n|\\u006[Ee])(?:s|\\u0073)(?:t|\\u0074)(?:r|\\u0072)(?:u|\\u0075)(?:c|\\u0063)(?:t|\\u0074)(?:o|\\u006[Ff])(?:r|\\u0072)"\s*:/;

/**
 * Whether a parsed JSON value has a `__proto__` key, or a `constructor` key
 * holding a `prototype` key, at any depth: keys that pollute prototypes when
 * a later step merges objects.
 */
function hasPollutingKey(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const node = stack.pop();
    if (typeof node !== 'object' || node === null) continue;
    if (Array.isArray(node)) {
      for (const item of node) stack.push(item);
      continue;
    }
    if (Object.hasOwn(node, '__proto__')) return true;
    const record = node as Record<string, unknown>;
    const constructorValue = Object.hasOwn(node, 'constructor') ? record['constructor'] : undefined;
    if (typeof constructorValue === 'object' && constructorValue !== null && Object.hasOwn(constructorValue, 'prototype')) return true;
    for (const key in record) stack.push(record[key]);
  }
  return false;
}

/**
 * How deep a request body may nest. No chat request comes near it (tool
 * schemas nest a few dozen levels at most); Jackson allows 1000 by default,
 * serde_json 128. Deeper bodies are refused because `JSON.stringify` and the
 * prefix hash's canonical JSON recurse, and overflow the stack at a few
 * thousand levels: a 500 for what is a bad request.
 */
export const MAX_NESTING_DEPTH = 512;

/** Whether a parsed JSON value nests objects and arrays deeper than `limit` (walked without recursion). */
function nestedDeeperThan(value: unknown, limit: number): boolean {
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
    if (depth > limit) return true;
    if (Array.isArray(node)) for (const child of node) visit(child, depth + 1);
    else for (const key in node) visit((node as Record<string, unknown>)[key], depth + 1);
  }
  return false;
}

/**
 * The longest `model` accepted. Real names are short (`qwen2.5-coder-32b-instruct-q4_k_m.gguf`,
 * `hf.co/unsloth/Qwen3-Coder-30B-A3B-Instruct-GGUF:Q4_K_XL`: under 64); compactor keeps
 * state per model, and a 16 MB name (60 requests took the process from 88 MB to 2.1 GB)
 * is a client that is not naming a model.
 */
export const MAX_MODEL_NAME_LENGTH = 256;

/** Messages for a client, naming what is wrong without echoing what was sent. */
function chatIssueMessage(issue: z.core.$ZodRawIssue): string | undefined {
  if (issue.code === 'invalid_type') return issue.input === undefined ? 'is required' : `must be ${describeType(issue.expected, 'json')}`;
  if (issue.code === 'too_small' && issue.origin === 'array') return 'must not be empty';
  return undefined;
}

/**
 * Parses and validates a chat completion body. Throws `UnsupportedMediaTypeError`
 * for a content type that is not JSON and `InvalidRequestError` for an empty
 * body, invalid JSON, a prototype-polluting key, nesting deeper than
 * {@link MAX_NESTING_DEPTH}, a missing or invalid `model` (or one longer than
 * {@link MAX_MODEL_NAME_LENGTH}), or a missing or invalid `messages`.
 *
 * @example
 * readChatRequest(Buffer.from('{"model":"m","messages":[{"role":"user","content":"hi"}]}'), 'application/json')
 * // → { model: 'm', messages: [{ role: 'user', content: 'hi' }] }
 */
export function readChatRequest(raw: unknown, contentType: string | undefined): ChatRequestBody {
  // No content type is accepted: some clients omit it for JSON.
  if (contentType !== undefined && !isJsonMediaType(mediaTypeOf(contentType))) throw new UnsupportedMediaTypeError(contentType);
  if (!Buffer.isBuffer(raw) || raw.length === 0) {
    throw new InvalidRequestError({ code: 'invalid_body', message: 'the request body is empty; expected a JSON object' });
  }
  const text = raw.toString('utf8');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    // The parser's message quotes the body, so it is not passed on (nor logged).
    throw new InvalidRequestError({ code: 'invalid_json', message: 'the request body is not valid JSON' });
  }
  if ((PROTO_KEY.test(text) || CONSTRUCTOR_KEY.test(text)) && hasPollutingKey(json)) {
    throw new InvalidRequestError({ code: 'invalid_body', message: 'the request body uses a forbidden key ("__proto__" or "constructor.prototype")' });
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new InvalidRequestError({ code: 'invalid_body', message: 'the request body must be a JSON object' });
  }
  // Nesting that deep needs at least one opening bracket per level.
  if (raw.length > MAX_NESTING_DEPTH && nestedDeeperThan(json, MAX_NESTING_DEPTH)) {
    throw new InvalidRequestError({ code: 'invalid_body', message: `the request body nests deeper than ${MAX_NESTING_DEPTH} levels` });
  }
  // The common case is checked without zod, which copies every object it accepts; zod words what is wrong.
  const body = json as Record<string, unknown>;
  if (isChatRequestBody(body)) return withModelNameChecked(body);
  const parsed = ChatRequestSchema.safeParse(json, { error: chatIssueMessage });
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const param = formatPath(issue.path);
    throw new InvalidRequestError({ code: 'invalid_body', message: `${param}: ${issue.message}`, param });
  }
  return withModelNameChecked(parsed.data);
}

function withModelNameChecked(body: ChatRequestBody): ChatRequestBody {
  if (body.model.length > MAX_MODEL_NAME_LENGTH) {
    throw new InvalidRequestError({ code: 'invalid_body', message: `model: must be at most ${MAX_MODEL_NAME_LENGTH} characters`, param: 'model' });
  }
  return body;
}

export interface PairOutcome {
  readonly body: ChatRequestBody;
  readonly changed: boolean;
  readonly repairs: readonly PairProblem[];
  /** `repaired 2 tool pairs`, when something was repaired. */
  readonly report: string | undefined;
}

/**
 * Applies `pairs: repair | reject | off`. `reject` throws an
 * `InvalidRequestError` naming the first problem
 * (`messages[7]: tool result "c9" answers no call`).
 */
export function applyPairMode(body: ChatRequestBody, mode: 'repair' | 'reject' | 'off'): PairOutcome {
  if (mode === 'off') return { body, changed: false, repairs: [], report: undefined };
  if (mode === 'reject') {
    const first = findPairProblems(body.messages)[0];
    if (first !== undefined) {
      throw new InvalidRequestError({ code: 'invalid_tool_pairs', message: describePairProblem(first), param: `messages[${first.index}]` });
    }
    return { body, changed: false, repairs: [], report: undefined };
  }
  const { messages, repairs } = repairPairs(body.messages);
  if (repairs.length === 0) return { body, changed: false, repairs, report: undefined };
  return {
    body: { ...body, messages },
    changed: true,
    repairs,
    report: `repaired ${repairs.length} tool pair${repairs.length === 1 ? '' : 's'}`,
  };
}
