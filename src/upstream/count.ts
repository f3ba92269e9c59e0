import { numberAt, type UpstreamJson } from './json-surface.js';

/**
 * Asking the upstream for an exact prompt token count: llama-server's
 * `POST /v1/chat/completions/input_tokens` (the same body, answered with
 * `{"input_tokens": N}`), else `POST /apply-template` then `POST /tokenize`
 * with `add_special: true`. The lookups only; which way is left alone for a
 * while is compaction/sizes/exact-count.ts's. Each tells `onStatus` every status
 * it got, and rejects when the upstream gave no answer.
 */

type CallHeaders = Readonly<Record<string, string>>;
type Body = Readonly<Record<string, unknown>>;

/** The count `/v1/chat/completions/input_tokens` gives for the body, or null. */
export async function inputTokensCount(upstream: UpstreamJson, body: Body, signal: AbortSignal | undefined, headers: CallHeaders | undefined, onStatus: (status: number) => void): Promise<number | null> {
  const reply = await upstream.postJson('/v1/chat/completions/input_tokens', { ...body, stream: false }, signal, headers);
  onStatus(reply.status);
  return reply.status === 200 ? (numberAt(reply.body, 'input_tokens') ?? null) : null;
}

/** The tokens of the body's prompt as the chat template renders it (`/apply-template`, then `/tokenize`), or null. */
export async function templateCount(upstream: UpstreamJson, body: Body, signal: AbortSignal | undefined, headers: CallHeaders | undefined, onStatus: (status: number) => void): Promise<number | null> {
  const template: Record<string, unknown> = { messages: body['messages'] };
  if (body['tools'] !== undefined) template['tools'] = body['tools'];
  if (body['chat_template_kwargs'] !== undefined) template['chat_template_kwargs'] = body['chat_template_kwargs'];
  const applied = await upstream.postJson('/apply-template', template, signal, headers);
  onStatus(applied.status);
  const prompt = (applied.body as { prompt?: unknown } | undefined)?.prompt;
  if (applied.status !== 200 || typeof prompt !== 'string') return null;
  const tokenized = await upstream.postJson('/tokenize', { content: prompt, add_special: true }, signal, headers);
  onStatus(tokenized.status);
  const tokens = (tokenized.body as { tokens?: unknown } | undefined)?.tokens;
  return tokenized.status === 200 && Array.isArray(tokens) ? tokens.length : null;
}
