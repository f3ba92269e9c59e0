import { type CompressPlan, planCompress } from '../compress-tier.js';
import { epochBoundary, trustedMarks } from '../plan.js';
import { prunedEpoch } from '../replacement.js';
import { compressedLine, wouldLine } from '../report.js';
import type { ModelFreeTier } from './tier.js';

/**
 * Compression (DESIGN.md § Compression; its plan is compress-tier.ts's):
 * the old tool results compressed, and pruned, every message in place, no
 * model call; the working set's results left alone. Taken when it alone brings the candidate under the threshold:
 * no summary is asked for (the next epoch, if it comes to that, is prepared in
 * the soft zone).
 */

export const compressTier: ModelFreeTier<CompressPlan> = {
  name: 'compress',
  shownAs: 'compress',
  needsModel: false,

  plan({ candidate, sizes, budget, trigger, settings, sizeOf, cut, somethingOld, keep }) {
    if (cut === null || !somethingOld || trigger !== 'size') return null;
    const compressed = planCompress(candidate, sizes, cut, settings, sizeOf, { keep, trusted: trustedMarks(candidate) });
    return compressed !== null && (budget === null || compressed.size < settings.threshold * budget) ? compressed : null;
  },

  settles: () => true,

  boundaryOf: (candidate, plan) => epochBoundary(candidate, plan.cut),

  epochOf(hashes, candidate, { plan, boundary }, before) {
    const report = compressedLine({ results: plan.results, before, after: plan.size });
    // A compression's markers name later calls, which hold the newer copies: it applies only to a history that has them (all of this one).
    return prunedEpoch(hashes, candidate, plan.messages, boundary, report, { tier: 'compress', seesWholeHistory: true });
  },

  wouldLine: ({ plan }, before) => wouldLine(compressedLine({ results: plan.results, before, after: plan.size })),
};
