import { MODELS_REMEMBERED, perModel } from './per-model.js';

/**
 * Per model, how many real tokens the upstream counts for one token of our
 * bytes/4 estimate. Learned from every answer's `usage.prompt_tokens` (or an
 * exact count) against the estimate of what was forwarded.
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

/** Ratios outside this range come from a mismatched measure (another model, a cached count), not a tokenizer. */
const RATIO_RANGE = { min: 0.5, max: 4 } as const;

export class TokenRatios {
  readonly #ratios = perModel<number>();

  /** Models with a measure (at most {@link MODELS_REMEMBERED}: a forgotten one starts over from the initial guess). */
  get size(): number {
    return this.#ratios.size;
  }

  /** The ratio for a model: learned, or {@link INITIAL_TOKEN_RATIO} before any measure. */
  get(model: string): number {
    return this.#ratios.get(model) ?? INITIAL_TOKEN_RATIO;
  }

  /**
   * Takes one measure: the upstream counted `realTokens` for what we estimated
   * at `estimate`. The first measure replaces the initial guess outright.
   */
  learn(model: string, realTokens: number, estimate: number): void {
    if (!(estimate >= MIN_ESTIMATE_TO_LEARN) || !(realTokens > 0)) return;
    const sample = Math.min(RATIO_RANGE.max, Math.max(RATIO_RANGE.min, realTokens / estimate));
    const previous = this.#ratios.get(model);
    this.#ratios.set(model, previous === undefined ? sample : previous + LEARNING_WEIGHT * (sample - previous));
  }
}
