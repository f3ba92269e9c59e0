/**
 * Whether an upstream error body says the prompt is larger than the model's
 * context: llama-server answers 400 with `error.type`
 * `exceed_context_size_error` (test fixture `ctx_exceeded_chat.txt`), OpenAI
 * with `error.code` `context_length_exceeded`.
 *
 * @example
 * isContextExceeded({ error: { code: 400, type: 'exceed_context_size_error', n_ctx: 2048 } }) // → true
 * isContextExceeded({ error: { code: 'context_length_exceeded' } }) // → true
 * isContextExceeded({ error: { type: 'invalid_request_error' } }) // → false
 */
export function isContextExceeded(body: unknown): boolean {
  if (typeof body !== 'object' || body === null || !('error' in body)) return false;
  const error = body.error;
  if (typeof error !== 'object' || error === null) return false;
  return ('type' in error && error.type === 'exceed_context_size_error') || ('code' in error && error.code === 'context_length_exceeded');
}

/**
 * The window an upstream refusal reports: llama-server's
 * `exceed_context_size_error` carries `n_ctx`, the slot's context size.
 *
 * @example
 * refusedWindow({ error: { type: 'exceed_context_size_error', n_prompt_tokens: 9000, n_ctx: 8192 } }) // → 8192
 * refusedWindow({ error: { code: 'context_length_exceeded' } })                                      // → null
 */
export function refusedWindow(body: unknown): number | null {
  if (!isContextExceeded(body)) return null;
  const nCtx = (body as { error: { n_ctx?: unknown } }).error.n_ctx;
  return typeof nCtx === 'number' && Number.isInteger(nCtx) && nCtx > 0 ? nCtx : null;
}
