import { ContextLengthExceededError } from '../../errors.js';
import type { ChatMessage } from '../../transcript/message.js';
import { estimateRequestTokens } from '../../transcript/tokens.js';
import { type Compacted, type CompactionInput, compactedOf } from '../engine/request.js';
import type { CompactionRequest } from '../engine/request.js';
import type { ExactCounter } from './exact-count.js';
import type { CompactionObserver } from '../ports.js';
import type { Budget } from '../policy/budget.js';
import type { CandidateSizes } from '../policy/decide.js';
import { isNear, scaledTo } from '../policy/sizing.js';
import type { RatioSharing } from './ratio-sharing.js';
import type { TokenRatios } from './token-ratio.js';
import type { Epoch } from '../types.js';

/**
 * Sizes held against the budget where a wrong estimate would cost a 400 or a
 * needless summary: near a threshold the upstream's exact count is asked
 * (and learned from); past the budget the request is refused, counted.
 */

export interface ExactSizesOptions {
  readonly counter: ExactCounter;
  readonly ratios: TokenRatios;
  readonly sharing: RatioSharing;
  readonly observer: CompactionObserver | undefined;
}

export class ExactSizes {
  readonly #options: ExactSizesOptions;

  constructor(options: ExactSizesOptions) {
    this.#options = options;
  }

  /** Sizes scaled to the upstream's exact count of the candidate, when it gives one. */
  async measured(request: CompactionRequest, messages: readonly ChatMessage[], sizes: CandidateSizes, signal: AbortSignal): Promise<CandidateSizes> {
    const exact = await this.#options.counter.count({ ...request.body, messages }, signal, request.headers);
    if (exact === null) return sizes;
    this.#options.sharing.learn(request.model, request.tenant, exact, estimateRequestTokens({ messages }) + request.toolsEstimate);
    return { ...scaledTo(sizes, exact), ratio: sizes.ratio };
  }

  /** The history with `epoch` applied, after checking that it leaves room for the answer. */
  async applied(epoch: Epoch, input: CompactionInput, request: CompactionRequest): Promise<Compacted> {
    const forwarded = [...epoch.replacement, ...request.messages.slice(epoch.sourceLength)];
    const estimate = estimateRequestTokens({ messages: forwarded }) + request.toolsEstimate;
    const { budget } = request;
    if (budget.tokens !== null) {
      let size = estimate * this.#options.ratios.get(request.model, request.tenant);
      if (isNear(size, budget.tokens)) {
        const exact = await this.#options.counter.count({ ...request.body, messages: forwarded }, input.signal, request.headers);
        if (exact !== null) {
          this.#options.sharing.learn(request.model, request.tenant, exact, estimate);
          size = exact;
        }
      }
      if (size > budget.tokens) throw this.tooLarge(size, budget, request, 0);
    }
    return compactedOf(input, { messages: forwarded, report: epoch.report, estimate, epoch: 'new', notes: epoch.notes, tier: epoch.strategy });
  }

  /** The 400 for a history that cannot fit even compacted, counted. */
  tooLarge(needed: number, budget: Budget, request: CompactionRequest, summaryTokens: number): ContextLengthExceededError {
    this.#options.observer?.compaction({ model: request.model, tier: null, outcome: 'too-large', tokensBefore: request.originalSize, tokensAfter: needed + summaryTokens, pending: false });
    return new ContextLengthExceededError(needed, budget.window ?? 0, budget.reserve, summaryTokens);
  }
}
