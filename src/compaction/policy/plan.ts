import type { ChatMessage } from '../../transcript/message.js';
import { headLength, turnRanges, balanceCut } from '../../transcript/groups.js';
import { isMarked } from '../../transcript/marks.js';
import type { Epoch } from '../types.js';
import type { CompressTierSettings } from './compress-tier.js';
import { type Sizes, totalSize } from './sizing.js';

/**
 * Planning: pure decisions over a candidate history. No I/O, no clock; sizes
 * come in through a function so the caller owns estimates, learned ratios
 * and exact counts.
 */

export interface CompactionSettings {
  /** Fraction of the budget at which a request is compacted before it is forwarded. */
  readonly threshold: number;
  /** Fraction of the budget a compaction aims for. */
  readonly target: number;
  /** Fraction of the budget kept as raw recent turns (at least one turn). */
  readonly keepRecent: number;
  /** Message count that triggers a compaction on its own; 0 is off. */
  readonly maxMessages: number;
  /** What a summary may cost: the `max_tokens` its request asks for. */
  readonly summaryMaxTokens: number;
  readonly pruneMaxResultChars: number;
  /** The compression tier, tried after pruning and before a summary; null or absent: off. */
  readonly compress?: CompressTierSettings | null;
  /** What a summary's kept turns are compressed with, when not `compress` (a background summary plans no compression tier, but compresses what it keeps). */
  readonly compressKept?: CompressTierSettings | null;
  /** The share of the budget the working set (the newest copy of each file read) may take, kept raw through every tier; 0 or absent: off. */
  readonly workingSet?: number;
  /** The working set's room in tokens is at least this (never more than half the budget); absent: the share alone. */
  readonly workingSetMinTokens?: number;
  /**
   * Whether a summary may move its cut back to keep the working set's turns in place (true or absent), or
   * summarizes them and carries the files after its notes (false: a forced compaction keeps the least it can).
   */
  readonly filesInPlace?: boolean;
  /**
   * Whether the working set's share is of the history's own size when that is below the budget (true: a forced
   * compaction, which a client asks for at its own limit, often far below a large window: what it asked to shrink
   * must shrink), or of the budget (false or absent).
   */
  readonly workingSetOfHistory?: boolean;
}

/**
 * What would be forwarded: an epoch's replacement followed by the original
 * messages it does not cover, or the original messages when no epoch applies.
 */
export interface Candidate {
  readonly messages: readonly ChatMessage[];
  /** How many leading messages of `messages` are the epoch's replacement (0 without an epoch). */
  readonly replacementLength: number;
  /** The index in the original history of `messages[replacementLength]`. */
  readonly sourceStart: number;
  readonly epoch: Epoch | null;
}

/**
 * The candidate indexes where a mark is genuine: where the epoch's
 * replacement put compactor's own messages. compactor never shows a marked
 * message to a client, so a mark anywhere else is a client's text.
 */
export function trustedMarks(candidate: Pick<Candidate, 'epoch'>): ReadonlySet<number> {
  return new Set(candidate.epoch?.marked ?? []);
}

export function candidateOf(original: readonly ChatMessage[], epoch: Epoch | null): Candidate {
  if (epoch === null) return { messages: original, replacementLength: 0, sourceStart: 0, epoch };
  return {
    messages: [...epoch.replacement, ...original.slice(epoch.sourceLength)],
    replacementLength: epoch.replacement.length,
    sourceStart: epoch.sourceLength,
    epoch,
  };
}

export type Trigger = 'size' | 'count';

/** Why a request must be compacted now, or null when it may be forwarded as it is. */
export function triggerOf(
  size: number,
  messageCount: number,
  budget: number | null,
  settings: Pick<CompactionSettings, 'threshold' | 'maxMessages'>,
): Trigger | null {
  if (budget !== null && size >= settings.threshold * budget) return 'size';
  if (settings.maxMessages > 0 && messageCount >= settings.maxMessages) return 'count';
  return null;
}

/** Tokens a summary pair costs once written: the notes (at most `max_tokens`) and the two messages' framing and fixed text. */
export function summaryPairTokens(summaryMaxTokens: number): number {
  return summaryMaxTokens + SUMMARY_PAIR_OVERHEAD_TOKENS;
}

/**
 * Framing of two messages, the marks and the assistant's fixed acknowledgement, with room to spare;
 * also the truncation notice that stands instead when the summary fails (about 55 tokens of fixed
 * text, which the notes from before it replace), so what a plan expects bounds whatever it makes.
 */
const SUMMARY_PAIR_OVERHEAD_TOKENS = 64;

/**
 * What the tiers leave when none of them has a plan: nothing to do (the
 * candidate is forwarded as it is), or too large whatever is done (`needed`
 * tokens, the summary's own not counted).
 */
export type NoPlan = { readonly tier: 'nothing'; readonly reason: NothingToCompact } | { readonly tier: 'too-large'; readonly needed: number };

/** "Nothing to do" is an outcome, not an error: the candidate is forwarded as it is. */
export type NothingToCompact = 'one-turn' | 'only-summary' | 'no-budget-and-no-count' | 'no-gain' | 'no-tier';

/**
 * Where a compaction cuts: the start of the oldest turn kept raw. Keeps the
 * recent turns that fit `keepRecent × budget`, at least the last one; a
 * count-triggered compaction also keeps at most `maxMessages / 2` messages
 * after the cut. Returns null when only one turn follows the head (nothing old
 * can go at a turn boundary). The cut always passes through `balanceCut`.
 */
export function chooseCut(
  candidate: Candidate,
  sizes: Sizes,
  budget: number | null,
  settings: CompactionSettings,
): number | null {
  const { messages } = candidate;
  const head = headLength(messages);
  const starts = turnRanges(messages, head)
    .map((range) => range.start)
    // The first turn is old by definition (cutting at it would leave nothing old).
    .filter((start) => start > head);
  if (starts.length === 0) return null;

  // Without a budget only the count can say how much to keep: start from the oldest
  // possible cut and let the count move it; with one, keep at least the last turn.
  let cutIndex = budget === null ? 0 : starts.length - 1;
  if (budget !== null) {
    const keepTokens = settings.keepRecent * budget;
    while (cutIndex > 0 && totalSize(sizes, starts[cutIndex - 1]!, messages.length) <= keepTokens) cutIndex--;
  }
  if (settings.maxMessages > 0) {
    // Whatever fired, a compaction must also get the count back under the trigger.
    const keepMessages = Math.floor(settings.maxMessages / 2);
    while (cutIndex < starts.length - 1 && messages.length - starts[cutIndex]! > keepMessages) cutIndex++;
  }
  return balanceCut(messages, starts[cutIndex]!);
}

/** Whether the old part holds anything beyond compactor's own marked messages (an earlier summary or notice), where the epoch put them. */
export function hasSomethingToSummarize(messages: readonly ChatMessage[], from: number, to: number, marked: ReadonlySet<number>): boolean {
  for (let index = from; index < to; index++) {
    if (!marked.has(index) || !isMarked(messages[index]!)) return true;
  }
  return false;
}

/**
 * The epoch a compaction makes: it covers the candidate up to `cut` (or up to
 * the end of the old replacement, when the cut falls inside it), and says how
 * the original messages it covers are forwarded from now on.
 */
export function epochBoundary(candidate: Candidate, cut: number): { candidateEnd: number; sourceLength: number } {
  const candidateEnd = Math.max(cut, candidate.replacementLength);
  return { candidateEnd, sourceLength: candidate.sourceStart + (candidateEnd - candidate.replacementLength) };
}
