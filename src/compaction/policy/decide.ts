import type { Config } from '../../config/schema.js';
import type { ChatMessage } from '../../transcript/message.js';
import { headLength } from '../../transcript/groups.js';
import { estimateMessageTokens } from '../../transcript/tokens.js';
import type { Budget } from './budget.js';
import type { Epoch, Tier } from '../types.js';
import {
  type Candidate,
  type CompactionPlan,
  type CompactionSettings,
  type Trigger,
  epochBoundary,
  planCompaction,
  summaryPairTokens,
  triggerOf,
} from './plan.js';
import { type Sizes, totalSize } from './sizing.js';
import { planSteps, type StepsPlan } from './plan-steps.js';
import { type CompressPlan, compressForBudget, compressSettingsOf } from './compress-tier.js';
import { compressesAtCrossing, compressNow, compressSteps, crossingCompression } from './compress-ahead.js';
import { type CostSpeeds, compressionCost, compressionIsCheaper, crossingCost, summaryCost } from './cost.js';

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

/** A summary or steps plan: what a summary call writes notes for. */
export type SummaryPlan = Extract<CompactionPlan, { tier: 'summary' }> | StepsPlan;

/** Where the epoch a summary plan makes ends in the candidate and in the original history. */
export interface Boundary {
  readonly candidateEnd: number;
  readonly sourceLength: number;
}

export type Decision =
  /** Forward the candidate as it is; `prepareNext` when it is in the soft zone (start the next epoch once answered). */
  | { readonly kind: 'forward'; readonly size: number; readonly prepareNext: boolean }
  /** Put the pending epoch in use and decide again: it applies with no waiting. */
  | { readonly kind: 'apply-pending'; readonly epoch: Epoch }
  /** Wait for the summary of this conversation already running, then decide again. */
  | { readonly kind: 'wait' }
  | { readonly kind: 'prune'; readonly plan: Extract<CompactionPlan, { tier: 'prune' }>; readonly boundary: Boundary }
  /** Old tool results compressed, no model call: an epoch like a pruning's. */
  | { readonly kind: 'compress'; readonly plan: CompressPlan; readonly boundary: Boundary }
  | { readonly kind: 'summary'; readonly plan: Extract<CompactionPlan, { tier: 'summary' }>; readonly boundary: Boundary; readonly counts: OldAndKept }
  | { readonly kind: 'steps'; readonly plan: StepsPlan; readonly boundary: Boundary; readonly counts: OldAndKept }
  /** Even compacted it cannot fit: `needed` tokens, of which `summaryTokens` would be a summary's. */
  | { readonly kind: 'too-large'; readonly needed: number; readonly summaryTokens: number };

/** For the report line: messages a summary replaces, and messages kept after the cut. */
export interface OldAndKept {
  readonly old: number;
  readonly kept: number;
}

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
export function decide(candidate: Candidate, sizes: CandidateSizes, budget: Budget, epochs: EpochState, configured: DecisionSettings): Decision {
  const settings = { ...configured, compress: compressForBudget(configured.compress, budget.tokens) };
  const size = totalSize(sizes);
  const trigger = triggerOf(size, candidate.messages.length, budget.tokens, settings);
  if (trigger === null) {
    const soft = budget.tokens !== null && size >= settings.softThreshold * budget.tokens;
    // In the soft zone, compress before preparing a summary: when it frees enough, no summary call is made for it. Not
    // while a summary of the conversation is pending or running: this epoch would leave that one behind, unused.
    if (soft && epochs.pending === null && !epochs.running) {
      if (settings.cost != null) return softZoneByCost(candidate, sizes, budget, settings, settings.cost);
      const compressed = compressNow(candidate, sizes, budget.tokens, settings);
      if (compressed !== null) return compressed;
      // Compression will do at the crossing: no summary is prepared for it.
      if (compressesAtCrossing(candidate, sizes, budget.tokens!, settings)) return { kind: 'forward', size, prepareNext: false };
    }
    return { kind: 'forward', size, prepareNext: soft };
  }
  // Crossed: an epoch prepared in the background applies now, with no waiting.
  if (epochs.pending !== null) return { kind: 'apply-pending', epoch: epochs.pending };
  // Another request of this conversation is compacting it: wait for that epoch rather than start a second summary.
  if (epochs.running && epochs.attempt < MAX_WAITS) return { kind: 'wait' };

  const plan = planTiers(candidate, sizes, budget.tokens, trigger, withSummaryOf(budget, settings));
  switch (plan.tier) {
    case 'nothing':
      return budget.tokens !== null && size > budget.tokens ? { kind: 'too-large', needed: size, summaryTokens: 0 } : { kind: 'forward', size, prepareNext: false };
    case 'too-large':
      return { kind: 'too-large', needed: plan.needed, summaryTokens: summaryPairTokens(budget.summaryTokens) };
    case 'prune':
      return { kind: 'prune', plan, boundary: epochBoundary(candidate, plan.cut) };
    case 'compress':
      return { kind: 'compress', plan, boundary: epochBoundary(candidate, plan.cut) };
    case 'summary':
      return { kind: 'summary', plan, boundary: boundaryOf(candidate, plan), counts: countsOf(candidate, plan) };
    case 'steps':
      return { kind: 'steps', plan, boundary: boundaryOf(candidate, plan), counts: countsOf(candidate, plan) };
  }
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
export function decideAhead(
  candidate: Candidate,
  sizes: CandidateSizes,
  budget: Budget,
  settings: DecisionSettings,
): Extract<Decision, { kind: 'summary' | 'steps' }> | null {
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
  const plan = planTiers(candidate, sizes, budget.tokens, 'size', ahead);
  if (plan.tier === 'summary') return { kind: 'summary', plan, boundary: boundaryOf(candidate, plan), counts: countsOf(candidate, plan) };
  if (plan.tier === 'steps') return { kind: 'steps', plan, boundary: boundaryOf(candidate, plan), counts: countsOf(candidate, plan) };
  return null;
}

/**
 * The soft zone by cost (cost.ts), once the upstream's speeds are learned: the same three ways as by tokens
 * (compress now, leave it to the crossing's compression, prepare a summary), but a compression now is taken
 * when it frees a few percent of the budget and costs the server no more per token freed than the way it
 * stands against: the crossing's compression when one can be expected (it frees more for about the same
 * re-reading), else the summary that would be prepared.
 */
function softZoneByCost(candidate: Candidate, sizes: CandidateSizes, budget: Budget, settings: DecisionSettings, speeds: CostSpeeds): Decision {
  const size = totalSize(sizes);
  const tokens = budget.tokens!;
  const threshold = settings.threshold * tokens;
  const compressed = compressNow(candidate, sizes, tokens, settings, { atLeast: 0 });
  const now = compressed === null ? null : compressionCost(candidate, sizes, compressed.plan, speeds);
  const crossing = crossingCompression(candidate, sizes, tokens, settings);
  if (crossing !== null) {
    if (now !== null && compressionIsCheaper(now, crossingCost(sizes, crossing, threshold, speeds), tokens)) return compressed!;
    return { kind: 'forward', size, prepareNext: false };
  }
  if (now !== null) {
    const ahead = decideAhead(candidate, sizes, budget, settings);
    const summary = ahead === null ? null : summaryCost(candidate, sizes, ahead.plan.size, threshold, budget.summaryTokens, speeds);
    if (compressionIsCheaper(now, summary, tokens)) return compressed!;
  }
  return { kind: 'forward', size, prepareNext: true };
}

/** The settings with the summary planned at what this budget allows it (less than configured on a small window). */
function withSummaryOf<T extends CompactionSettings>(budget: Budget, settings: T): T {
  return budget.summaryTokens === settings.summaryMaxTokens ? settings : { ...settings, summaryMaxTokens: budget.summaryTokens };
}

/** Tiers 1 and 2, then tier 3 when one long turn is the problem and its steps do better. */
function planTiers(candidate: Candidate, sizes: CandidateSizes, budget: number | null, trigger: Trigger, settings: CompactionSettings): CompactionPlan | StepsPlan {
  const sizeOf = (message: ChatMessage): number => estimateMessageTokens(message) * sizes.ratio;
  const plan = planCompaction(candidate, sizes, budget, trigger, settings, sizeOf);
  const target = budget === null ? Number.POSITIVE_INFINITY : settings.target * budget;
  const needsSteps = plan.tier === 'nothing' || plan.tier === 'too-large' || (plan.tier === 'summary' && plan.size > target);
  if (!needsSteps || (plan.tier === 'nothing' && trigger === 'count')) return plan;
  // One long turn: its old steps are compressed, when that is enough, before they are summarized.
  const compressed = trigger === 'size' && plan.tier !== 'summary' ? compressSteps(candidate, sizes, budget, settings, sizeOf) : null;
  if (compressed !== null) return compressed;
  const steps = planSteps(candidate, sizes, budget, settings);
  if (steps === null) return plan;
  if (plan.tier === 'summary' && steps.size >= plan.size) return plan;
  if (budget !== null && steps.size > budget) {
    return plan.tier === 'summary' ? plan : { tier: 'too-large', needed: steps.size - settings.summaryMaxTokens };
  }
  return steps;
}

/** Where the part a plan rewrites ends: the cut, or one past it for steps (the first kept message carries the notes), or past the kept results a summary prunes. */
function coveredEnd(plan: SummaryPlan): number {
  return plan.tier === 'steps' ? plan.cut + 1 : Math.max(plan.cut, plan.prunedKept?.end ?? 0);
}

function boundaryOf(candidate: Candidate, plan: SummaryPlan): Boundary {
  return epochBoundary(candidate, coveredEnd(plan));
}

function countsOf(candidate: Candidate, plan: SummaryPlan): OldAndKept {
  const head = headLength(candidate.messages);
  const keptTurnStart = plan.tier === 'summary' && plan.turnStart !== undefined ? 1 : 0;
  return { old: plan.cut - head - (plan.tier === 'steps' ? 1 : 0), kept: candidate.messages.length - plan.cut + keptTurnStart };
}

/** Whether a decision makes a new epoch from the candidate. */
export function compacts(decision: Decision): decision is Extract<Decision, { kind: 'prune' | 'compress' | 'summary' | 'steps' }> {
  return decision.kind === 'prune' || decision.kind === 'compress' || decision.kind === 'summary' || decision.kind === 'steps';
}
