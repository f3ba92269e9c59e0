import type { ChatMessage } from '../../../transcript/message.js';
import { headLength } from '../../../transcript/groups.js';
import { pruneToolResults } from '../../../transcript/prune.js';
import { resized } from '../compress-tier.js';
import { epochBoundary } from '../plan.js';
import { prunedEpoch } from '../replacement.js';
import { prunedLine, wouldLine } from '../report.js';
import type { ModelFreeTier } from './tier.js';

/**
 * Pruning, the first tier: the old tool results of the turns before the cut cut down
 * to `prune.max_result_chars`, every message in place, no model call, never
 * a result of the working set. Taken when that alone meets the target.
 */

export interface PrunePlan {
  readonly tier: 'prune';
  readonly cut: number;
  /** The candidate with its old results pruned, every message in place. */
  readonly messages: ChatMessage[];
  /** Tool results pruned. */
  readonly pruned: number;
  readonly size: number;
}

export const pruneTier: ModelFreeTier<PrunePlan> = {
  name: 'prune',
  shownAs: 'prune',
  needsModel: false,

  plan({ candidate, sizes, trigger, settings, sizeOf, total, target, cut, somethingOld, keep }) {
    if (cut === null || !somethingOld || trigger !== 'size') return null;
    const { messages } = candidate;
    const head = headLength(messages);
    const pruned = pruneToolResults(messages, settings.pruneMaxResultChars, { from: head, to: cut, shouldPrune: (_, index) => !keep.has(index) });
    const { size, changed: count } = resized(messages, pruned, sizes, total, { from: head, to: cut }, sizeOf);
    return count > 0 && size <= target ? { tier: 'prune', cut, messages: [...pruned], pruned: count, size } : null;
  },

  settles: () => true,

  boundaryOf: (candidate, plan) => epochBoundary(candidate, plan.cut),

  epochOf(hashes, candidate, { plan, boundary }, before) {
    const report = prunedLine({ results: plan.pruned, before, after: plan.size });
    return prunedEpoch(hashes, candidate, plan.messages, boundary, report, { tier: 'prune', seesWholeHistory: false });
  },

  wouldLine: ({ plan }, before) => wouldLine(prunedLine({ results: plan.pruned, before, after: plan.size })),
};
