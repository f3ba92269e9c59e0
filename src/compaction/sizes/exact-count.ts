import type { UpstreamJson } from '../../upstream/json-surface.js';
import { inputTokensCount, templateCount } from '../../upstream/count.js';
import type { CallHeaders } from '../ports.js';

/**
 * Exact prompt token counts, asked only near a threshold where a wrong guess
 * costs a 400 or a needless summary (the two ways to ask are
 * upstream/count.ts's). A way the upstream does not offer is not asked
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
    return inputTokensCount(this.#upstream, body, signal, headers, (status) => this.#unsupported('input_tokens', status)).catch(() => null);
  }

  async #templateAndTokenize(body: Readonly<Record<string, unknown>>, signal?: AbortSignal, headers?: CallHeaders): Promise<number | null> {
    if (!this.#available('tokenize')) return null;
    return templateCount(this.#upstream, body, signal, headers, (status) => this.#unsupported('tokenize', status)).catch(() => null);
  }
}
