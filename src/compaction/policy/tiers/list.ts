import type { ChatMessage } from '../../../transcript/message.js';
import { headLength } from '../../../transcript/groups.js';
import { type Candidate, type CompactionSettings, type NoPlan, type Trigger, chooseCut, hasSomethingToSummarize, trustedMarks } from '../plan.js';
import { type Sizes, totalSize } from '../sizing.js';
import { keptIndexes, withWorkingSet, workingSetOf } from '../working-set.js';
import { compressTier } from './compress.js';
import { pruneTier } from './prune.js';
import { stepsTier } from './steps.js';
import { summaryTier } from './summary.js';
import { type CompactionTier, type Planned, type TierList, isTierPlan } from './tier.js';

/**
 * The compaction tiers, cheapest first: a candidate is compacted by the first
 * whose plan is taken (DESIGN.md § How to add a compaction tier: a new tier
 * is one file in this folder and one line here). The engine takes another
 * list through its `tiers` option; this one is the default.
 */
export const BUILT_IN_TIERS = [
  pruneTier,
  compressTier,
  summaryTier,
  stepsTier,
] as const satisfies TierList;

/** What the tiers of a list plan: each tier file's plan type. */
export type PlanOf<T extends CompactionTier> = Parameters<T['settles']>[0];

/** What an epoch made when a model tier's summary failed is stored as, instead of the tier's name. */
export const TRUNCATED = 'truncated' as const;

/** The names a stored epoch's tier may have: every built-in tier's, and `truncated`. */
export const STORED_TIERS: readonly [string, ...string[]] = [TRUNCATED, ...BUILT_IN_TIERS.map((tier) => tier.name)];

/** The tier of `tiers` named `name`; undefined for a name no tier has (an epoch stored by another list). */
export function tierNamed(tiers: TierList, name: string): CompactionTier | undefined {
  return tiers.find((tier) => tier.name === name);
}

/**
 * Asks each tier in turn for its plan, given what the ones before it planned,
 * and returns the first plan its tier settles on; when none does, what the
 * last tier that planned anything left (nothing to do, too large, or a plan
 * still the best there is). The plan of a tier that writes notes carries the
 * files of the working set its cut would take (policy/working-set.ts).
 */
export function planTiers<T extends TierList>(
  tiers: T,
  candidate: Candidate,
  sizes: Sizes,
  budget: number | null,
  trigger: Trigger,
  settings: CompactionSettings,
  sizeOf: (message: ChatMessage) => number,
): PlanOf<T[number]> | NoPlan {
  const cut = chooseCut(candidate, sizes, budget, settings);
  const total = totalSize(sizes);
  // The working set stays raw through every tier: no pruning or compression touches it, a summary carries what its cut takes.
  // A forced compaction's files take their share of the history it shrinks when that is smaller than the budget.
  const filesBasis = settings.workingSetOfHistory === true && budget !== null ? Math.min(budget, total) : budget;
  const workingSet = workingSetOf({ messages: candidate.messages, trusted: trustedMarks(candidate) }, filesBasis, settings, sizeOf);
  const context = {
    candidate,
    sizes,
    budget,
    trigger,
    settings,
    sizeOf,
    total,
    target: budget === null ? Number.POSITIVE_INFINITY : settings.target * budget,
    cut,
    somethingOld: cut !== null && hasSomethingToSummarize(candidate.messages, headLength(candidate.messages), cut, trustedMarks(candidate)),
    workingSet,
    keep: keptIndexes(workingSet),
  };
  // Carried after the chosen plan's notes, not in each tier's: the tiers compare and settle on the sizes of their notes alone.
  const carrying = (plan: Planned): Planned =>
    isTierPlan(plan) && tierNamed(tiers, plan.tier)?.needsModel === true ? withWorkingSet(plan, workingSet, budget, sizeOf) : plan;
  let planned: Planned | null = null;
  for (const tier of tiers) {
    planned = tier.plan(context, planned) ?? planned;
    if (planned === null || !isTierPlan(planned)) continue;
    const own = tierNamed(tiers, planned.tier);
    // Typed as the list's plans: each tier returns its own (or another's of the list, as steps returns a compression).
    if (own !== undefined && own.settles(planned, context)) return carrying(planned) as PlanOf<T[number]>;
  }
  return carrying(planned ?? { tier: 'nothing', reason: 'no-tier' }) as PlanOf<T[number]> | NoPlan;
}
