import { LRUCache } from 'lru-cache';
import { movingAverage, RATIO_RANGE, type UnsharedMeasures } from '../types.js';

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

/**
 * Measures kept per (tenant, model) until they are shared (a shared store
 * takes them every few seconds): far more than one replica answers for one
 * tenant's model in that time; beyond it the oldest go, whose weight in the
 * moving average is already below 0.7^32 ≈ 1e-5.
 */
const UNSHARED_KEPT = 32;

/** Below this many estimated tokens the template's fixed tokens dominate and a measure says little. */
const MIN_ESTIMATE_TO_LEARN = 64;

/**
 * How many (tenant, model) ratios are remembered, the least recently used
 * forgotten first (a forgotten one starts over from the prior, which errs
 * early, never late). An entry is a tenant digest and a model name of at
 * most 256 characters: ~300 bytes, so ~300 KB at most.
 */
export const RATIOS_REMEMBERED = 1024;


export class TokenRatios {
  readonly #ratios = new LRUCache<string, number>({ max: RATIOS_REMEMBERED });
  /** Measures taken since the shared store last took them, in order (see {@link adopt}). */
  readonly #unshared = new Map<string, { readonly tenant: string; readonly model: string; readonly samples: number[] }>();
  readonly #shared: boolean;

  /** `shared`: measures are kept for a shared store until {@link takeUnshared} (without one, none are kept). */
  constructor({ shared = false }: { shared?: boolean } = {}) {
    this.#shared = shared;
  }

  /** (Tenant, model) pairs with a measure (at most {@link RATIOS_REMEMBERED}: a forgotten one starts over from the initial guess). */
  get size(): number {
    return this.#ratios.size;
  }

  /** The ratio for a tenant's model: learned from that tenant's requests, or {@link INITIAL_TOKEN_RATIO} before any measure. */
  get(model: string, tenant: string): number {
    return this.#ratios.get(keyOf(model, tenant)) ?? INITIAL_TOKEN_RATIO;
  }

  /** Whether this process has a ratio for a tenant's model: measured here, or adopted from a shared store. */
  known(model: string, tenant: string): boolean {
    return this.#ratios.has(keyOf(model, tenant));
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
    this.#ratios.set(key, averaged(this.#ratios.get(key), [sample]));
    // Bounded like the ratios: past that many pairs within one share, a new pair's measures stay this replica's.
    if (!this.#shared || (!this.#unshared.has(key) && this.#unshared.size >= RATIOS_REMEMBERED)) return;
    const unshared = this.#unshared.get(key) ?? { tenant, model, samples: [] };
    unshared.samples.push(sample);
    if (unshared.samples.length > UNSHARED_KEPT) unshared.samples.shift();
    this.#unshared.set(key, unshared);
  }

  /** Whether measures wait to be shared. */
  get hasUnshared(): boolean {
    return this.#unshared.size > 0;
  }

  /** The measures taken since the last call, for the shared store, which merges them into its own average in order. */
  takeUnshared(): UnsharedMeasures[] {
    const taken = [...this.#unshared.values()];
    this.#unshared.clear();
    return taken;
  }

  /**
   * Takes the shared store's ratio for a tenant's model (every replica's
   * measures merged), then the measures of this replica it has not been
   * given yet, so none is lost between two shares.
   */
  adopt(model: string, tenant: string, shared: number): void {
    if (!(shared >= RATIO_RANGE.min && shared <= RATIO_RANGE.max)) return;
    const key = keyOf(model, tenant);
    this.#ratios.set(key, averaged(shared, this.#unshared.get(key)?.samples ?? []));
  }
}

/** The moving average after `samples`, in order; the first measure replaces a missing average outright. */
function averaged(previous: number | undefined, samples: readonly number[]): number {
  return movingAverage(previous, samples) ?? INITIAL_TOKEN_RATIO;
}

/** A tenant is a digest or ''; NUL never occurs in one, so no two pairs share a key. */
function keyOf(model: string, tenant: string): string {
  return `${tenant}\u0000${model}`;
}
