import type { ChatMessage } from '../../transcript/message.js';
import { headLength, turnRanges, balanceCut, stepRanges } from '../../transcript/groups.js';
import { isMarked } from '../../transcript/marks.js';
import { pruneToolResults } from '../../transcript/prune.js';
import type { Epoch } from '../types.js';
import { type CompressPlan, type CompressTierSettings, planCompress, resized } from './compress-tier.js';
import { type CompressedKept, compressedKept, keptPartOf } from './kept-part.js';
import { type Sizes, totalSize } from './sizing.js';
import type { WorkingFile } from '../../transcript/compress/working-set.js';
import { cutKeepingFiles, keptIndexes, workingSetOf } from './working-set.js';

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

export type CompactionPlan =
  | { readonly tier: 'prune'; readonly cut: number; readonly messages: ChatMessage[]; readonly pruned: number; readonly size: number }
  | CompressPlan
  /**
   * `turnStart`: when the cut goes through the last complete turn (its last
   * steps kept raw), the user message that starts it, kept raw before them.
   */
  | { readonly tier: 'summary'; readonly cut: number; readonly size: number; readonly turnStart?: number; readonly prunedKept?: PrunedKept; readonly workingSet?: readonly WorkingFile[] }
  | { readonly tier: 'nothing'; readonly reason: NothingToCompact }
  | { readonly tier: 'too-large'; readonly needed: number };

/**
 * Kept turns whose old tool results a summary forwards pruned or compressed:
 * the candidate with them so, and the end of the last changed one (the epoch covers up to
 * there, so the pruned copies are what is forwarded from now on).
 */
export interface PrunedKept {
  readonly messages: readonly ChatMessage[];
  readonly end: number;
  /** The kept results the compression tier compressed (the rest of `messages`' changes are prunings); absent: none. */
  readonly compressed?: CompressedKept | undefined;
}

/** "Nothing to do" is an outcome, not an error: the candidate is forwarded as it is. */
export type NothingToCompact = 'one-turn' | 'only-summary' | 'no-budget-and-no-count' | 'no-gain';

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

/**
 * When the cut keeps only the last turn (a request's last turn is its new user
 * message) because the complete turn before it alone is larger than
 * `keepRecent × budget`, the last steps of that turn that fit, kept raw behind
 * its user message: the cut moves to a step boundary inside it. Keeping only
 * the new user message left the model with nothing of what it just did (a
 * 48-turn agent run kept 211 of 32.1k tokens, issue 13 item 10). Null when
 * there is no such turn, or not even its last step fits.
 */
function cutThroughLastTurn(
  candidate: Candidate,
  sizes: Sizes,
  budget: number | null,
  settings: CompactionSettings,
  cut: number,
): { cut: number; turnStart: number } | null {
  if (budget === null || settings.maxMessages > 0) return null;
  const { messages } = candidate;
  const head = headLength(messages);
  const turns = turnRanges(messages, head);
  const last = turns.at(-1);
  const previous = turns.at(-2);
  // Only when the cut kept nothing but the last turn, and the turn before it is a real one (not the head's summary pair).
  if (last === undefined || previous === undefined || last.start !== cut || previous.start <= head) return null;
  const steps = stepRanges(messages, { start: previous.start + 1, end: previous.end });
  const keepTokens = settings.keepRecent * budget;
  const fixed = sizes.perMessage[previous.start]! + totalSize(sizes, cut, messages.length);
  let first = steps.length;
  while (first > 0 && fixed + totalSize(sizes, steps[first - 1]!.start, cut) <= keepTokens) first--;
  // Every step fits: the whole turn would have been kept; none fits: nothing to keep raw.
  if (first === 0 || first === steps.length) return null;
  return { cut: steps[first]!.start, turnStart: previous.start };
}

/** Whether the old part holds anything beyond compactor's own marked messages (an earlier summary or notice), where the epoch put them. */
function hasSomethingToSummarize(messages: readonly ChatMessage[], from: number, to: number, marked: ReadonlySet<number>): boolean {
  for (let index = from; index < to; index++) {
    if (!marked.has(index) || !isMarked(messages[index]!)) return true;
  }
  return false;
}

/**
 * Chooses the cheapest tier that brings the candidate under `target × budget`:
 * pruning old tool results (no model call), else compressing them (no model
 * call; enough when under the threshold), else summarizing the old turns.
 * A summary that lands between the target and the budget is still taken (it is
 * the best there is); a candidate whose kept part alone exceeds the budget is
 * `too-large`.
 */
export function planCompaction(
  candidate: Candidate,
  sizes: Sizes,
  budget: number | null,
  trigger: Trigger,
  settings: CompactionSettings,
  sizeOf: (message: ChatMessage) => number,
): CompactionPlan {
  const { messages } = candidate;
  const head = headLength(messages);
  const cut = chooseCut(candidate, sizes, budget, settings);
  const total = totalSize(sizes);
  if (cut === null) {
    return budget !== null && total > budget ? { tier: 'too-large', needed: total } : { tier: 'nothing', reason: 'one-turn' };
  }
  if (!hasSomethingToSummarize(messages, head, cut, trustedMarks(candidate))) {
    const kept = totalSize(sizes, 0, head) + totalSize(sizes, cut, messages.length);
    return budget !== null && kept > budget ? { tier: 'too-large', needed: kept } : { tier: 'nothing', reason: 'only-summary' };
  }
  const target = budget === null ? Number.POSITIVE_INFINITY : settings.target * budget;
  // The working set stays raw through every tier: no pruning or compression touches it.
  const workingSet = workingSetOf({ messages, trusted: trustedMarks(candidate) }, budget, settings, sizeOf);
  const keep = keptIndexes(workingSet);

  if (trigger === 'size') {
    const pruned = pruneToolResults(messages, settings.pruneMaxResultChars, { from: head, to: cut, shouldPrune: (_, index) => !keep.has(index) });
    const { size, changed: count } = resized(messages, pruned, sizes, total, { from: head, to: cut }, sizeOf);
    if (count > 0 && size <= target) return { tier: 'prune', cut, messages: [...pruned], pruned: count, size };
    // Compression alone brings it under the threshold: no summary is asked for (the next epoch, if it comes to that, is prepared in the soft zone).
    const compressed = planCompress(candidate, sizes, cut, settings, sizeOf, { keep });
    if (compressed !== null && (budget === null || compressed.size < settings.threshold * budget)) return compressed;
  }

  // Kept turns are measured with their old tool results pruned (those of complete turns, never of the current one) and
  // compressed (those before the protected tail), and forwarded so: compressed turns are smaller, and more of them stay.
  const lastTurnStart = turnRanges(messages, head).at(-1)!.start;
  const part = trigger === 'size' ? keptPartOf(messages, sizes, { cut, lastTurnStart }, { ...settings, keep }, sizeOf) : null;
  const keptPruned = part?.messages ?? messages;
  const measured = part?.sizes ?? sizes;
  let keptCut = keptPruned === messages ? cut : (chooseCut(candidate, measured, budget, settings) ?? cut);
  if (!hasSomethingToSummarize(messages, head, keptCut, trustedMarks(candidate))) keptCut = cut;
  // The working set stays in place where its turns fit its share: kept there, a later re-read supersedes it (compressed),
  // where a copy carried after the notes would stay beside the newer one until the next summary.
  const inPlace = budget === null ? keptCut : cutKeepingFiles(messages, measured, workingSet, keptCut, (settings.workingSet ?? 0) * budget);
  if (inPlace !== keptCut && hasSomethingToSummarize(messages, head, inPlace, trustedMarks(candidate))) keptCut = inPlace;
  const throughTurn = cutThroughLastTurn(candidate, measured, budget, settings, keptCut);
  const summaryCut = throughTurn?.cut ?? keptCut;
  let prunedEnd = 0;
  for (let index = summaryCut; index < lastTurnStart; index++) if (keptPruned[index] !== messages[index]) prunedEnd = index + 1;
  const keptSizes = prunedEnd === 0 ? sizes : measured;
  const keptTurnStart = throughTurn === null ? 0 : keptSizes.perMessage[throughTurn.turnStart]!;
  const size = totalSize(keptSizes, 0, head) + summaryPairTokens(settings.summaryMaxTokens) + keptTurnStart + totalSize(keptSizes, summaryCut, messages.length);
  if (budget !== null && size > budget) return { tier: 'too-large', needed: size - summaryPairTokens(settings.summaryMaxTokens) };
  // A summary must lower what fired: the tokens (its pair may cost as much as `size` says), or the count
  // (its pair is two messages). When it cannot and the history fits as it is, a model call only makes it worse.
  const gains = trigger === 'size' ? size < total : cut - head > 2;
  if (!gains && (budget === null || total <= budget)) return { tier: 'nothing', reason: 'no-gain' };
  return {
    tier: 'summary',
    cut: summaryCut,
    size,
    ...(throughTurn === null ? {} : { turnStart: throughTurn.turnStart }),
    ...(prunedEnd === 0 ? {} : { prunedKept: { messages: keptPruned, end: prunedEnd, compressed: compressedKept(part!, sizes, summaryCut, prunedEnd) } }),
  };
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
