import { LRUCache } from 'lru-cache';

/**
 * Per tenant and model, how many real tokens the upstream counts for one
 * token of our bytes/4 estimate. Learned from every answer's
 * `usage.prompt_tokens` (or an exact count) against the estimate of what was
 * forwarded. Per tenant: what one client sends (four requests of digits
 * teach 4 tokens per estimated token) never changes how another's
 * conversation is sized; a tenant's first request starts from the prior.
 */

/**
 * Until the first measure: tokenizers of local models count code, JSON and
 * non-English text well above bytes/4, and a template adds its own tokens; a
 * fresh proxy should err towards compacting a little early, never late.
 */
export const INITIAL_TOKEN_RATIO = 1.25;

/** Weight of a new measure: a few requests are enough to follow a change of model, one odd request is not. */
const LEARNING_WEIGHT = 0.3;

/** Below this many estimated tokens the template's fixed tokens dominate and a measure says little. */
const MIN_ESTIMATE_TO_LEARN = 64;

/**
 * How many (tenant, model) ratios are remembered, the least recently used
 * forgotten first (a forgotten one starts over from the prior, which errs
 * early, never late). An entry is a tenant digest and a model name of at
 * most 256 characters: ~300 bytes, so ~300 KB at most.
 */
export const RATIOS_REMEMBERED = 1024;

/** Ratios outside this range come from a mismatched measure (another model, a cached count), not a tokenizer. */
const RATIO_RANGE = { min: 0.5, max: 4 } as const;

export class TokenRatios {
  readonly #ratios = new LRUCache<string, number>({ max: RATIOS_REMEMBERED });

  /** (Tenant, model) pairs with a measure (at most {@link RATIOS_REMEMBERED}: a forgotten one starts over from the initial guess). */
  get size(): number {
    return this.#ratios.size;
  }

  /** The ratio for a tenant's model: learned from that tenant's requests, or {@link INITIAL_TOKEN_RATIO} before any measure. */
  get(model: string, tenant: string): number {
    return this.#ratios.get(keyOf(model, tenant)) ?? INITIAL_TOKEN_RATIO;
  }

  /**
   * Takes one measure of a tenant's request: the upstream counted `realTokens`
   * for what we estimated at `estimate`. The first measure replaces the
   * initial guess outright.
   */
  learn(model: string, tenant: string, realTokens: number, estimate: number): void {
    if (!(estimate >= MIN_ESTIMATE_TO_LEARN) || !(realTokens > 0)) return;
    const sample = Math.min(RATIO_RANGE.max, Math.max(RATIO_RANGE.min, realTokens / estimate));
    const key = keyOf(model, tenant);
    const previous = this.#ratios.get(key);
    this.#ratios.set(key, previous === undefined ? sample : previous + LEARNING_WEIGHT * (sample - previous));
  }
}

/** A tenant is a digest or ''; NUL never occurs in one, so no two pairs share a key. */
function keyOf(model: string, tenant: string): string {
  return `${tenant}\u0000${model}`;
}
