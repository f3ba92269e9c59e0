import type { ChatMessage } from '../../../transcript/message.js';
import type { WorkingFile } from '../../../transcript/compress/working-set.js';
import type { Epoch } from '../../types.js';
import type { Candidate, CompactionSettings, NoPlan, Trigger } from '../plan.js';
import type { Sizes } from '../sizing.js';

/**
 * What a compaction tier is (DESIGN.md § How to add a compaction tier): one
 * object holding its plan, the epoch or replacement it makes, its report
 * words, its observe-mode words and whether it needs the model. The tiers
 * are tried in the order of their list (tiers/list.ts); decide, the engine,
 * the epoch writer, observe mode, the stored epoch, the dashboard and the
 * metrics walk that list and name no tier.
 */

/** What every tier plans from: one candidate crossed (or forced), its sizes and budget, and what the tiers share. */
export interface PlanContext {
  readonly candidate: Candidate;
  readonly sizes: Sizes;
  /** The budget in tokens; null when the window is unknown (then only the count triggers). */
  readonly budget: number | null;
  readonly trigger: Trigger;
  readonly settings: CompactionSettings;
  /** The size in real tokens of a message a tier rewrites. */
  readonly sizeOf: (message: ChatMessage) => number;
  /** The candidate's whole size. */
  readonly total: number;
  /** `target × budget`: what a compaction aims for (infinite without a budget). */
  readonly target: number;
  /** Where a compaction at a turn boundary cuts (`chooseCut`): null when only one turn follows the head. */
  readonly cut: number | null;
  /** Whether the part before `cut` holds anything beyond compactor's own marked messages (an earlier summary or notice). */
  readonly somethingOld: boolean;
  /** The working set (policy/working-set.ts): the newest copy of each file read, newest first, within its share of the budget; none when off. */
  readonly workingSet: readonly WorkingFile[];
  /** The indexes of its tool results in the candidate: no tier prunes or compresses them. */
  readonly keep: ReadonlySet<number>;
}

/** A tier's plan: named by its tier, where it cuts, and the size it expects to forward. */
export interface TierPlan {
  readonly tier: string;
  readonly cut: number;
  readonly size: number;
  /** For a tier that writes notes: the files of the working set its cut takes, carried after the notes (set by planTiers, policy/working-set.ts). */
  readonly workingSet?: readonly WorkingFile[];
}

/** What the tiers planned so far: a tier's plan, or nothing to do, or too large whatever is done. */
export type Planned = TierPlan | NoPlan;

/** Whether the tiers planned a compaction (rather than nothing, or too large). */
export function isTierPlan(planned: Planned): planned is TierPlan {
  return planned.tier !== 'nothing' && planned.tier !== 'too-large';
}

/** Where the epoch a plan makes ends, in the candidate and in the original history. */
export interface Boundary {
  readonly candidateEnd: number;
  readonly sourceLength: number;
}

/** For a summary's report line: messages it replaces, and messages kept after the cut. */
export interface OldAndKept {
  readonly old: number;
  readonly kept: number;
}

/** A decision to compact with a tier that needs no model call: its plan and the epoch's boundary. */
export interface ModelFreeDecision<P extends TierPlan = TierPlan> {
  readonly kind: P['tier'];
  readonly plan: P;
  readonly boundary: Boundary;
}

/** A decision to compact with a tier whose notes a summary call writes: also what the report line counts. */
export interface ModelDecision<P extends TierPlan = TierPlan> extends ModelFreeDecision<P> {
  readonly counts: OldAndKept;
}

interface TierBase<P extends TierPlan> {
  /** The tier's name: its decisions' `kind`, its plans' `tier`, the stored epoch's tier, the metrics' `tier` label. */
  readonly name: P['tier'];
  /** How the dashboard's page names an epoch of this tier. */
  readonly shownAs: string;
  /**
   * Its plan for the candidate, given what the tiers before it planned
   * (`before`; null when none planned anything): a plan (its own, or another
   * tier's it delegates to), nothing to do or too large; null to leave
   * `before` as it stands.
   */
  plan(context: PlanContext, before: Planned | null): Planned | null;
  /** Whether its plan is taken as it is; otherwise the tiers after it are asked whether they do better. */
  settles(plan: P, context: PlanContext): boolean;
  /** Where the epoch its plan makes ends. */
  boundaryOf(candidate: Candidate, plan: P): Boundary;
}

/** A tier that rewrites messages in place, with no model call (pruning, compression): its epoch is made at once. */
export interface ModelFreeTier<P extends TierPlan = TierPlan> extends TierBase<P> {
  readonly needsModel: false;
  /** The epoch its decision makes, its report line said from `before` (the request's size) to the plan's. */
  epochOf(hashes: readonly string[], candidate: Candidate, decision: ModelFreeDecision<P>, before: number): Epoch;
  /** Observe mode's line: what it would have done. */
  wouldLine(decision: ModelFreeDecision<P>, before: number): string;
}

/** A tier whose notes a summary call writes (through the epoch writer), or whose place a truncation notice takes when that fails. */
export interface ModelTier<P extends TierPlan = TierPlan> extends TierBase<P> {
  readonly needsModel: true;
  countsOf(candidate: Candidate, plan: P): OldAndKept;
  /**
   * What it forwards in place of the candidate up to `candidateEnd`: the
   * head, the notes (`written: 'notes'`) or the truncation notice
   * (`'truncated'`) where it puts them, and the kept messages.
   */
  replacementOf(messages: readonly ChatMessage[], plan: P, candidateEnd: number, text: string, written: 'notes' | 'truncated'): ChatMessage[];
  /** Where that replacement carries compactor's marks: what it writes, and the genuine marks (`marked`, candidate indexes) it keeps. */
  markedIndexesOf(messages: readonly ChatMessage[], plan: P, candidateEnd: number, marked: ReadonlySet<number>): number[];
  /** The truncation notice's text: how much was dropped, and the notes from before it when there are any. */
  truncationText(dropped: number, earlierNotes: string | null): string;
  /** The report line of its notes written. */
  summarizedLine(decision: ModelDecision<P>, figures: { before: number; after: number; milliseconds: number }): string;
  /** The report line of a truncation made in its place. */
  truncatedLine(decision: ModelDecision<P>, figures: { before: number; after: number; reason: string }): string;
  /** Observe mode's line: what it would have done (observe mode calls no model, so it says nothing of the notes). */
  wouldLine(decision: ModelDecision<P>, before: number): string;
}

/** One compaction tier, either kind. */
export type CompactionTier<P extends TierPlan = TierPlan> = ModelFreeTier<P> | ModelTier<P>;

/** The list the engine compacts with, cheapest first (tiers/list.ts holds the built-in one). */
export type TierList = readonly CompactionTier[];
