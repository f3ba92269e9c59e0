/**
 * How fast the upstream reads a prompt, from what llama-server reports with
 * each answer (`timings.prompt_n` tokens read anew in `timings.prompt_ms`):
 * what re-reading a conversation in another slot would cost, the bound of a
 * turn's wait for its home slot (issue 33 item 4). Kept small and apart on
 * purpose: the server-seconds ledger (issue 36) learns server speeds too,
 * and can replace this one.
 */

// Fewer tokens than this are mostly the server's fixed cost per task, not its reading speed.
const MIN_TOKENS = 64;
// Each answer moves the estimate a fifth of the way: a few answers follow a change (another model, a loaded GPU), one outlier does not.
const WEIGHT = 0.2;

export class PrefillSpeed {
  #msPerToken: number | null = null;

  /** One answer's `timings` (either may be missing: then nothing is learned). */
  observe(timings: { readonly prompt_n?: number | undefined; readonly prompt_ms?: number | undefined } | undefined): void {
    const tokens = timings?.prompt_n;
    const ms = timings?.prompt_ms;
    if (tokens === undefined || ms === undefined || tokens < MIN_TOKENS || !(ms > 0)) return;
    const rate = ms / tokens;
    this.#msPerToken = this.#msPerToken === null ? rate : this.#msPerToken + WEIGHT * (rate - this.#msPerToken);
  }

  /**
   * The milliseconds to read `tokens` anew, or null before any answer said.
   *
   * @example
   * speed.observe({ prompt_n: 1000, prompt_ms: 500 }); speed.msToRead(4000) // → 2000
   */
  msToRead(tokens: number): number | null {
    return this.#msPerToken === null ? null : tokens * this.#msPerToken;
  }
}
