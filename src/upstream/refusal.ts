/**
 * Whether an upstream error body says the prompt is larger than the model's
 * context, and the window it names, in the words each server documents:
 *
 * - llama-server answers 400 with `error.type` `exceed_context_size_error`
 *   and `n_ctx` (test fixture `ctx_exceeded_chat.txt`); its message is
 *   "request (4390 tokens) exceeds the available context size (4096 tokens),
 *   try increasing it" (ggml-org/llama.cpp#19774), which Ollama's runner
 *   passes on as its own 400 (ollama/ollama#17889).
 * - vLLM answers 400 `BadRequestError` whose message says "This model's
 *   maximum context length is 4096 tokens. However, you requested 6261
 *   tokens …" (or "… and your request has 2778 input tokens"), in
 *   `error.message` or, before vLLM 0.6, in a top-level `message`
 *   (`ErrorResponse`, vllm/entrypoints/openai/protocol.py).
 * - LM Studio answers 400 with `error` a string: "The number of tokens to
 *   keep from the initial prompt is greater than the context length (n_keep:
 *   13055>= n_ctx: 4096) …", formerly "Trying to keep the first 15857 tokens
 *   when context the overflows. However, the model is loaded with context
 *   length of only 4096 tokens …" (lmstudio-ai/lmstudio-bug-tracker#237).
 * - Ollama's own API: `{"error":"the input length exceeds the context
 *   length"}`, naming no size.
 * - OpenAI: `error.code` `context_length_exceeded`.
 */

/** The sentences that say "over the context", each with the window it names in its first group when it names one. */
const OVERFLOW_SENTENCES: readonly RegExp[] = [
  /exceeds the available context size \((\d+) tokens\)/i,
  /maximum context length is (\d+) tokens/i,
  /greater than the context length \(n_keep: *\d+ *>= *n_ctx: *(\d+)\)/i,
  /greater than the context length/i,
  /loaded with context length of only (\d+) tokens/i,
  /n_keep \(\d+\) >= n_ctx \((\d+)\)/i,
  /the input length exceeds the context length/i,
];

/** The error's message, wherever the server puts it: `error` as a string, `error.message`, or a top-level `message`. */
function messageOf(body: object): string | undefined {
  const error = 'error' in body ? body.error : undefined;
  if (typeof error === 'string') return error;
  if (typeof error === 'object' && error !== null && 'message' in error && typeof error.message === 'string') return error.message;
  return 'message' in body && typeof body.message === 'string' ? body.message : undefined;
}

/** The overflow sentence in `body`'s message, and the window it names (null when it names none); undefined when it is no overflow. */
function overflowOf(body: object): { readonly window: number | null } | undefined {
  const message = messageOf(body);
  if (message === undefined) return undefined;
  for (const sentence of OVERFLOW_SENTENCES) {
    const match = sentence.exec(message);
    if (match === null) continue;
    const named = match[1] === undefined ? null : Number(match[1]);
    return { window: named !== null && named > 0 ? named : null };
  }
  return undefined;
}

/**
 * @example
 * isContextExceeded({ error: { code: 400, type: 'exceed_context_size_error', n_ctx: 2048 } }) // → true
 * isContextExceeded({ error: { code: 'context_length_exceeded' } }) // → true
 * isContextExceeded({ object: 'error', message: "This model's maximum context length is 4096 tokens. …" }) // → true
 * isContextExceeded({ error: { type: 'invalid_request_error' } }) // → false
 */
export function isContextExceeded(body: unknown): boolean {
  if (typeof body !== 'object' || body === null) return false;
  const error = 'error' in body ? body.error : undefined;
  if (typeof error === 'object' && error !== null) {
    if (('type' in error && error.type === 'exceed_context_size_error') || ('code' in error && error.code === 'context_length_exceeded')) return true;
  }
  return overflowOf(body) !== undefined;
}

/**
 * The window an upstream refusal reports: llama-server's `n_ctx`, else the
 * size its message names (vLLM, LM Studio, Ollama's runner).
 *
 * @example
 * refusedWindow({ error: { type: 'exceed_context_size_error', n_prompt_tokens: 9000, n_ctx: 8192 } }) // → 8192
 * refusedWindow({ error: { message: "This model's maximum context length is 4096 tokens. However, you requested 6261 tokens" } }) // → 4096
 * refusedWindow({ error: { code: 'context_length_exceeded' } })                                      // → null
 */
export function refusedWindow(body: unknown): number | null {
  if (!isContextExceeded(body)) return null;
  const nCtx = (body as { error?: { n_ctx?: unknown } }).error?.n_ctx;
  if (typeof nCtx === 'number' && Number.isInteger(nCtx) && nCtx > 0) return nCtx;
  return overflowOf(body as object)?.window ?? null;
}
