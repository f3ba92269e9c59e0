import type { Budget } from './budget.js';
import type { Decision, DecisionSettings } from './decide.js';
import type { TierName } from '../types.js';
import { reusedLine, wouldPrepareLine, wouldRefuseLine } from './report.js';
import { BUILT_IN_TIERS, tierNamed } from './tiers/list.js';
import type { ModelDecision, TierList } from './tiers/tier.js';

/**
 * Observe mode (`compaction.mode: observe`): a decision said, not done. The
 * engine looks up and decides as it would in compact mode, once, with no
 * waiting, no summary call and no epoch written; this says what it would
 * have done, in the words of the report lines (`would summarize 80 messages
 * -> 1 summary + 12 kept (61.2k -> 9.1k tokens)`).
 */

export interface Observed {
  /** The line, or null when nothing would have been done. */
  readonly line: string | null;
  /** The tier that would have compacted, for the metrics; null for none. */
  readonly tier: TierName | null;
  /** Whether the decision compacts (or refuses): counted as an `observed` compaction. */
  readonly counted: boolean;
  /** The size that would have been forwarded. */
  readonly after: number;
}

export function observedDecision(decision: Decision, options: { before: number; budget: Budget; reusing: boolean }, tiers: TierList = BUILT_IN_TIERS): Observed {
  const { before, budget } = options;
  switch (decision.kind) {
    case 'forward':
      if (options.reusing) return { line: `would ${reusedLine({ before, after: decision.size }).replace('epoch reused', 'reuse an epoch')}`, tier: null, counted: false, after: decision.size };
      return { line: decision.prepareNext ? wouldPrepareLine({ size: decision.size }) : null, tier: null, counted: false, after: decision.size };
    case 'apply-pending':
      return { line: 'would apply the epoch prepared in the background', tier: null, counted: false, after: before };
    case 'wait':
      return { line: 'would wait for the summary already running', tier: null, counted: false, after: before };
    case 'too-large':
      return { line: wouldRefuseLine({ needed: decision.needed + decision.summaryTokens, window: budget.window }), tier: null, counted: true, after: before };
    default: {
      // A tier's decision, said in its own words.
      const tier = tierNamed(tiers, decision.kind);
      if (tier === undefined) throw new Error(`no tier is named ${decision.kind}`);
      const line = tier.needsModel ? tier.wouldLine(decision as ModelDecision, before) : tier.wouldLine(decision, before);
      return { line, tier: tier.name, counted: true, after: decision.plan.size };
    }
  }
}

/**
 * The settings `POST /v1/compact` with `"force": true` decides with: every
 * size crosses the threshold (so there is a compaction whenever there is
 * something old to summarize), the target is out of reach (so the tier is
 * a summary, never a pruning that already fits), and what is kept raw is the
 * least the plan keeps: the last turn (or the task anchor and last steps of
 * one long turn), as an agent's `/compact` command expects. The working set's
 * files are carried after the notes, never kept in place by moving the cut
 * back (which, on a large window, left nothing old to summarize), and take at
 * most their share of the history itself, not of a large window's budget (a
 * client that compacts at 20k tokens of a 128k window got back more than it
 * sent, and compacted again).
 */
export function forcedSettings(settings: DecisionSettings): DecisionSettings {
  // Not 0: a size of 0 tokens is no reason to compact. One millionth of a 32k budget is 0.03 tokens.
  const tiny = 1e-6;
  return { ...settings, threshold: tiny, softThreshold: tiny, target: tiny, keepRecent: tiny, filesInPlace: false, workingSetOfHistory: true };
}
