import { numberAt, type UpstreamJson } from '../upstream/json-surface.js';
import type { CallHeaders } from './ports.js';

/**
 * Exact prompt token counts, asked only near a threshold where a wrong guess
 * costs a 400 or a needless summary: llama-server's
 * `POST /v1/chat/completions/input_tokens` (the same body, answered with
 * `{"input_tokens": N}`), else `POST /apply-template` then `POST /tokenize`
 * with `add_special: true`. A way the upstream does not offer is not asked
 * again for a while.
 */

/** How long an endpoint that answered 404/501 is left alone: an upgrade of the server may add it. */
const UNSUPPORTED_RETRY_MS = 10 * 60_000;

export class ExactCounter {
  readonly #upstream: UpstreamJson;
  readonly #now: () => number;
  readonly #unsupportedUntil = new Map<'input_tokens' | 'tokenize', number>();

  constructor(upstream: UpstreamJson, now: () => number = Date.now) {
    this.#upstream = upstream;
    this.#now = now;
  }

  /** The prompt tokens of a chat request body, or null when the upstream cannot tell. */
  async count(body: Readonly<Record<string, unknown>>, signal?: AbortSignal, headers?: CallHeaders): Promise<number | null> {
    return (await this.#inputTokens(body, signal, headers)) ?? (await this.#templateAndTokenize(body, signal, headers));
  }

  #available(way: 'input_tokens' | 'tokenize'): boolean {
    return (this.#unsupportedUntil.get(way) ?? 0) <= this.#now();
  }

  #unsupported(way: 'input_tokens' | 'tokenize', status: number): void {
    if (status === 404 || status === 405 || status === 501) this.#unsupportedUntil.set(way, this.#now() + UNSUPPORTED_RETRY_MS);
  }

  async #inputTokens(body: Readonly<Record<string, unknown>>, signal?: AbortSignal, headers?: CallHeaders): Promise<number | null> {
    if (!this.#available('input_tokens')) return null;
    try {
      const reply = await this.#upstream.postJson('/v1/chat/completions/input_tokens', { ...body, stream: false }, signal, headers);
      this.#unsupported('input_tokens', reply.status);
      return reply.status === 200 ? (numberAt(reply.body, 'input_tokens') ?? null) : null;
    } catch {
      return null;
    }
  }

  async #templateAndTokenize(body: Readonly<Record<string, unknown>>, signal?: AbortSignal, headers?: CallHeaders): Promise<number | null> {
    if (!this.#available('tokenize')) return null;
    try {
      const template: Record<string, unknown> = { messages: body['messages'] };
      if (body['tools'] !== undefined) template['tools'] = body['tools'];
      if (body['chat_template_kwargs'] !== undefined) template['chat_template_kwargs'] = body['chat_template_kwargs'];
      const applied = await this.#upstream.postJson('/apply-template', template, signal, headers);
      this.#unsupported('tokenize', applied.status);
      const prompt = (applied.body as { prompt?: unknown } | undefined)?.prompt;
      if (applied.status !== 200 || typeof prompt !== 'string') return null;
      const tokenized = await this.#upstream.postJson('/tokenize', { content: prompt, add_special: true }, signal, headers);
      this.#unsupported('tokenize', tokenized.status);
      const tokens = (tokenized.body as { tokens?: unknown } | undefined)?.tokens;
      return tokenized.status === 200 && Array.isArray(tokens) ? tokens.length : null;
    } catch {
      return null;
    }
  }
}
