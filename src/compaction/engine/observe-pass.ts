import type { CompactionRequest } from './request.js';
import { type Compacted, type CompactionInput, compactedOf } from './request.js';
import type { CompactionLogger, CompactionObserver } from '../ports.js';
import { type CandidateSizes, type DecisionSettings, decide } from '../policy/decide.js';
import { observedDecision } from '../policy/observe-mode.js';
import { candidateOf } from '../policy/plan.js';
import { sizesOf } from '../policy/sizing.js';
import type { TierList } from '../policy/tiers/tier.js';
import type { TokenRatios } from '../sizes/token-ratio.js';
import type { EpochRepository } from '../epochs/repository.js';
import { estimateRequestTokens } from '../../transcript/tokens.js';

export interface ObservePassOptions {
  readonly epochs: EpochRepository;
  readonly ratios: TokenRatios;
  readonly settings: DecisionSettings;
  readonly tiers: TierList;
  readonly observer: CompactionObserver | undefined;
  readonly logger: CompactionLogger | undefined;
}

/**
 * Observe mode past the fast path: one lookup (an epoch another replica
 * wrote still counts), one decision, said and counted, nothing done. The
 * client's messages are forwarded as they came, oversized results included.
 */
export async function observeOnce(options: ObservePassOptions, input: CompactionInput, request: CompactionRequest): Promise<Compacted> {
  const { epochs, ratios, settings, tiers, observer, logger } = options;
  const { hashes, messages, model, budget, toolsEstimate, originalSize } = request;
  const ratio = ratios.get(model, request.tenant);
  const { inUse, pending } = await epochs.forHistory(request).lookup(hashes);
  const candidate = candidateOf(messages, inUse);
  observer?.epochLookup(candidate.epoch !== null);
  const sizes: CandidateSizes = { ...sizesOf(candidate.messages, toolsEstimate, ratio), ratio };
  const decision = decide(candidate, sizes, budget, { pending, running: false, attempt: 0 }, settings, tiers);
  const observed = observedDecision(decision, { before: originalSize, budget, reusing: candidate.epoch !== null }, tiers);
  if (observed.counted) {
    observer?.compaction({ model, tier: observed.tier, outcome: 'observed', tokensBefore: originalSize, tokensAfter: observed.after, pending: false });
  }
  if (observed.line !== null) logger?.info({ model, mode: 'observe', tier: observed.tier }, observed.line);
  return compactedOf(input, { messages: input.request.messages, report: observed.line, estimate: estimateRequestTokens({ messages: input.request.messages }) + toolsEstimate });
}
