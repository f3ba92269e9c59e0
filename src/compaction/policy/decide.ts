import type { Config } from '../../config/schema.js';
import type { ChatMessage } from '../../transcript/message.js';
import { estimateMessageTokens } from '../../transcript/tokens.js';
import type { Budget } from './budget.js';
import type { Epoch } from '../types.js';
import { type Candidate, type CompactionSettings, type Trigger, summaryPairTokens, triggerOf } from './plan.js';
import { type Sizes, totalSize } from './sizing.js';
import { compressForBudget, compressSettingsOf } from './compress-tier.js';
import { compressesAtCrossing, compressesInstead, compressNow, crossingCompression } from './compress-ahead.js';
import { type CostSpeeds, compressionCost, compressionIsCheaper, crossingCost, lastStepTokens, summaryCost } from './cost.js';
import { BUILT_IN_TIERS, planTiers, tierNamed } from './tiers/list.js';
import { type ModelDecision, type ModelFreeDecision, type ModelFreeTier, type ModelTier, type Planned, type TierList, type TierPlan, isTierPlan } from './tiers/tier.js';

/**
 * What to do with one candidate (DESIGN.md § The request path, 5 and 6): a
 * pure function of its sizes, its budget and what the epoch cache holds for
 * its conversation. No I/O, no clock, no store: the engine gathers these
 * inputs, calls {@link decide}, and performs what it says.
 */

export interface DecisionSettings extends CompactionSettings {
  /** Fraction of the budget from which the next epoch is prepared in the background. */
  readonly softThreshold: number;
  /** The upstream's learned speeds, when the soft zone decides by cost (cost.ts); absent or null: by tokens alone. */
  readonly cost?: CostSpeeds | null;
}

/** The settings of `compaction` in the configuration, as {@link decide} reads them. */
export function decisionSettingsOf(compaction: Config['compaction']): DecisionSettings {
  return {
    threshold: compaction.threshold,
    softThreshold: compaction.soft_threshold,
    target: compaction.target,
    keepRecent: compaction.keep_recent,
    maxMessages: compaction.max_messages,
    summaryMaxTokens: compaction.summary.max_tokens,
    pruneMaxResultChars: compaction.prune.max_result_chars,
    compress: compressSettingsOf(compaction.compress),
    workingSet: compaction.working_set,
    workingSetMinTokens: compaction.working_set_min_tokens,
  };
}

/** What the epoch cache holds for this conversation, beyond the candidate's own epoch. */
export interface EpochState {
  /** A pending epoch that covers more of the history than the candidate's (prepared in the background). */
  readonly pending: Epoch | null;
  /** Whether a summary of this conversation is being computed now (by another request, or in the background). */
  readonly running: boolean;
  /** How many times this request has already waited for a running summary. */
  readonly attempt: number;
}

/** How many times a request waits for a running compaction of its conversation and decides again before deciding regardless. */
export const MAX_WAITS = 3;

/** A decision to compact with one of the built-in tiers, as its tier's kind (model-free, or written by a summary call) types it. */
export type TierDecision = DecisionOfTier<(typeof BUILT_IN_TIERS)[number]>;

type DecisionOfTier<T> = T extends ModelTier<infer P> ? ModelDecision<P> : T extends ModelFreeTier<infer P> ? ModelFreeDecision<P> : never;

/** The decisions whose epoch a summary call writes (the epoch writer's). */
export type ModelTierDecision = Extract<TierDecision, { readonly counts: unknown }>;

export type Decision =
  /** Forward the candidate as it is; `prepareNext` when it is in the soft zone (start the next epoch once answered). */
  | { readonly kind: 'forward'; readonly size: number; readonly prepareNext: boolean }
  /** Put the pending epoch in use and decide again: it applies with no waiting. */
  | { readonly kind: 'apply-pending'; readonly epoch: Epoch }
  /** Wait for the summary of this conversation already running, then decide again. */
  | { readonly kind: 'wait' }
  /** Compact by a tier: its kind is the tier's name (tiers/list.ts). */
  | TierDecision
  /** Even compacted it cannot fit: `needed` tokens, of which `summaryTokens` would be a summary's. */
  | { readonly kind: 'too-large'; readonly needed: number; readonly summaryTokens: number };

/**
 * Whether a request may skip hashing and the epoch lookup altogether: its size
 * (before any epoch) is under the soft threshold, and its count under
 * `max_messages`. Most requests of a proxy take this path.
 */
export function skipsLookup(size: number, messageCount: number, budget: Budget, settings: Pick<DecisionSettings, 'softThreshold' | 'maxMessages'>): boolean {
  const underSoft = budget.tokens === null || size < settings.softThreshold * budget.tokens;
  return underSoft && (settings.maxMessages === 0 || messageCount < settings.maxMessages);
}

/** Sizes of the candidate's messages (estimate × ratio, or scaled to an exact count), and the ratio new messages are sized with. */
export interface CandidateSizes extends Sizes {
  readonly ratio: number;
}

/**
 * Decides what to do with a candidate: forward it, apply a pending epoch,
 * wait for a running summary, compact it by one of the tiers, or refuse it.
 *
 * @example
 * decide(candidate, sizes, budgetOf(8192, undefined, 1024, 1024), { pending: null, running: false, attempt: 0 }, settings)
 * // → { kind: 'forward', size: 3100, prepareNext: false } for a history of 3.1k tokens
 */
export function decide(candidate: Candidate, sizes: CandidateSizes, budget: Budget, epochs: EpochState, configured: DecisionSettings, tiers: TierList = BUILT_IN_TIERS): Decision {
  const settings = { ...configured, compress: compressForBudget(configured.compress, budget.tokens) };
  const size = totalSize(sizes);
  const trigger = triggerOf(size, candidate.messages.length, budget.tokens, settings);
  if (trigger === null) {
    const soft = budget.tokens !== null && size >= settings.softThreshold * budget.tokens;
    // In the soft zone, compress before preparing a summary: when it frees enough, no summary call is made for it. Not
    // while a summary of the conversation is pending or running: this epoch would leave that one behind, unused.
    if (soft && epochs.pending === null && !epochs.running) {
      if (settings.cost != null) return softZoneByCost(candidate, sizes, budget, settings, settings.cost, tiers);
      const compressed = compressNow(candidate, sizes, budget.tokens, settings);
      if (compressed !== null) return compressed;
      // Compression will do at the crossing: no summary is prepared for it.
      if (compressesAtCrossing(candidate, sizes, budget.tokens!, settings)) return { kind: 'forward', size, prepareNext: false };
    }
    return { kind: 'forward', size, prepareNext: soft };
  }
  // Crossed: an epoch prepared in the background applies now, with no waiting; but not when it would leave the history in
  // the soft zone and a compression alone gets back under the threshold (compress-ahead.ts `compressesInstead`): on a 4k
  // window the working set is half the budget, a summary applied there freed ~500 tokens and the next was prepared at once.
  if (epochs.pending !== null) return compressesInstead(candidate, sizes, budget.tokens, settings, epochs.pending) ?? { kind: 'apply-pending', epoch: epochs.pending };
  // Another request of this conversation is compacting it: wait for that epoch rather than start a second summary.
  if (epochs.running && epochs.attempt < MAX_WAITS) return { kind: 'wait' };

  const plan = planned(tiers, candidate, sizes, budget.tokens, trigger, withSummaryOf(budget, settings));
  if (isTierPlan(plan)) return decisionOf(tiers, candidate, plan);
  if (plan.tier === 'too-large') return { kind: 'too-large', needed: plan.needed, summaryTokens: summaryPairTokens(budget.summaryTokens) };
  return budget.tokens !== null && size > budget.tokens ? { kind: 'too-large', needed: size, summaryTokens: 0 } : { kind: 'forward', size, prepareNext: false };
}

/**
 * The epoch to prepare in the background for a candidate in the soft zone, or
 * null when there is none worth a model call. It is planned for the crossing,
 * not for today's size: it applies only once the conversation has grown from
 * here to the threshold, and that growth stays raw too. So it keeps that much
 * less now (what is kept raw then is about `keep_recent` again), and pruning
 * (no model call, done when needed) is reason to prepare nothing only when it
 * will still be enough then: pruned today's size plus the growth under the
 * target. A 48-turn agent run on a 32k window saw pruning "do" in the soft
 * zone and met every crossing with a synchronous summary (issue 13, item 9).
 */
export function decideAhead(candidate: Candidate, sizes: CandidateSizes, budget: Budget, settings: DecisionSettings, tiers: TierList = BUILT_IN_TIERS): ModelTierDecision | null {
  if (budget.tokens === null || budget.tokens <= 0) return null;
  const growth = Math.max(0, settings.threshold * budget.tokens - totalSize(sizes)) / budget.tokens;
  const ahead = {
    ...withSummaryOf(budget, settings),
    // A compression is decided when a request is in the soft zone or crosses, never prepared ahead (it costs no call);
    // the summary prepared compresses what it keeps all the same (it moves the prefix anyway).
    compress: null,
    compressKept: compressForBudget(settings.compress, budget.tokens),
    keepRecent: Math.max(0, settings.keepRecent - growth),
    // What is forwarded after the epoch, plus the growth to come, must meet the target at the crossing.
    target: Math.max(0, settings.target - growth),
  };
  const plan = planned(tiers, candidate, sizes, budget.tokens, 'size', ahead);
  if (!isTierPlan(plan) || tierNamed(tiers, plan.tier)?.needsModel !== true) return null;
  return decisionOf(tiers, candidate, plan) as ModelTierDecision;
}

/**
 * The soft zone by cost (cost.ts), once the upstream's speeds are learned: the same three ways as by tokens
 * (compress now, leave it to the crossing's compression, prepare a summary), but a compression now is taken
 * when it frees a few percent of the budget and costs the server no more per token freed than the way it
 * stands against: the crossing's compression when one can be expected (it frees more for about the same
 * re-reading), else the summary that would be prepared.
 */
function softZoneByCost(candidate: Candidate, sizes: CandidateSizes, budget: Budget, settings: DecisionSettings, speeds: CostSpeeds, tiers: TierList): Decision {
  const size = totalSize(sizes);
  const tokens = budget.tokens!;
  const threshold = settings.threshold * tokens;
  const compressed = compressNow(candidate, sizes, tokens, settings, { atLeast: 0 });
  const now = compressed === null ? null : compressionCost(candidate, sizes, compressed.plan, speeds);
  const crossing = crossingCompression(candidate, sizes, tokens, settings);
  const step = lastStepTokens(candidate, sizes);
  if (crossing !== null) {
    if (now !== null && compressionIsCheaper(now, crossingCost(sizes, crossing, threshold, speeds), tokens, step)) return compressed!;
    return { kind: 'forward', size, prepareNext: false };
  }
  if (now !== null) {
    const ahead = decideAhead(candidate, sizes, budget, settings, tiers);
    const summary = ahead === null ? null : summaryCost(candidate, sizes, ahead.plan.size, threshold, budget.summaryTokens, speeds);
    if (compressionIsCheaper(now, summary, tokens, step)) return compressed!;
  }
  return { kind: 'forward', size, prepareNext: true };
}

/** The settings with the summary planned at what this budget allows it (less than configured on a small window). */
function withSummaryOf<T extends CompactionSettings>(budget: Budget, settings: T): T {
  return budget.summaryTokens === settings.summaryMaxTokens ? settings : { ...settings, summaryMaxTokens: budget.summaryTokens };
}

/** The tiers' plan for a candidate, its new messages sized with the candidate's ratio. */
function planned(tiers: TierList, candidate: Candidate, sizes: CandidateSizes, budget: number | null, trigger: Trigger, settings: CompactionSettings): Planned {
  const sizeOf = (message: ChatMessage): number => estimateMessageTokens(message) * sizes.ratio;
  return planTiers(tiers, candidate, sizes, budget, trigger, settings, sizeOf);
}

/**
 * The decision to compact by the tier that made `plan`: the epoch's boundary
 * and, for a tier a summary call writes, what its report line counts. Typed
 * as a built-in tier's: a list given at run time (a test's) types its own.
 */
function decisionOf(tiers: TierList, candidate: Candidate, plan: TierPlan): TierDecision {
  const tier = tierNamed(tiers, plan.tier);
  if (tier === undefined) throw new Error(`no tier named ${plan.tier} made this plan`);
  const boundary = tier.boundaryOf(candidate, plan);
  const decision = tier.needsModel ? { kind: plan.tier, plan, boundary, counts: tier.countsOf(candidate, plan) } : { kind: plan.tier, plan, boundary };
  return decision as TierDecision;
}

/** Whether a decision makes a new epoch from the candidate: a tier's. */
export function compacts(decision: Decision): decision is TierDecision {
  return 'plan' in decision;
}
