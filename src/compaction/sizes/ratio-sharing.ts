import type { TokenRatios } from './token-ratio.js';
import type { SharedLearning } from '../epochs/learning.js';

/**
 * How often a replica gives its new ratio measures to a shared store: off any
 * request, batched (one round trip for every tenant's model measured since),
 * and soon enough that a conversation moving to another replica finds them
 * (an agent's next request comes seconds later).
 */
const RATIO_SHARE_INTERVAL_MS = 2_000;

/** Learning token ratios, and handing the measures to a shared store every few seconds (none without one). */
export class RatioSharing {
  readonly #learning: SharedLearning | undefined;
  readonly #ratios: TokenRatios;
  /** The next share of ratio measures with the store, while one is due. */
  #due: NodeJS.Timeout | undefined;

  constructor(learning: SharedLearning | undefined, ratios: TokenRatios) {
    this.#learning = learning;
    this.#ratios = ratios;
  }

  /** Takes the upstream's real prompt size for a tenant's forwarded request. */
  learn(model: string, tenant: string, promptTokens: number, estimate: number): void {
    this.#ratios.learn(model, tenant, promptTokens, estimate);
    if (this.#learning === undefined || !this.#ratios.hasUnshared || this.#due !== undefined) return;
    this.#due = setTimeout(() => void this.share(), RATIO_SHARE_INTERVAL_MS);
    // A pending share never keeps the process alive; measures not shared at exit are this replica's only.
    this.#due.unref();
  }

  /** Gives the measures taken since the last share to the shared store now (the timer's work). */
  async share(): Promise<void> {
    clearTimeout(this.#due);
    this.#due = undefined;
    if (this.#learning === undefined || !this.#ratios.hasUnshared) return;
    await this.#learning.shareRatios(this.#ratios.takeUnshared());
  }
}
