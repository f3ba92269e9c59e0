import type { ChatMessage } from '../../../transcript/message.js';
import type { WorkingFile } from '../../../transcript/compress/working-set.js';
import { headLength, turnRanges, stepRanges } from '../../../transcript/groups.js';
import { type CompressedKept, compressedKept, keptPartOf } from '../kept-part.js';
import { type Candidate, type CompactionSettings, chooseCut, epochBoundary, hasSomethingToSummarize, summaryPairTokens, trustedMarks } from '../plan.js';
import { keptMarks, summaryPair, truncationNotice, truncationText, withWorkingSetBlock } from '../replacement.js';
import { summarizedLine, truncatedLine, withCompressed, wouldSummarizeLine } from '../report.js';
import { type Sizes, totalSize } from '../sizing.js';
import { cutKeepingFiles, workingSetRoom } from '../working-set.js';
import type { ModelTier } from './tier.js';

/**
 * A summary of old turns: the turns before the cut replaced by a
 * summary pair (the notes a summary call writes, and the assistant's
 * acknowledgement), the recent turns kept raw. A summary that lands between
 * the target and the budget is still taken when no later tier does better;
 * a candidate whose kept part alone exceeds the budget is `too-large`.
 */

export interface SummaryPlan {
  readonly tier: 'summary';
  readonly cut: number;
  readonly size: number;
  /** When the cut goes through the last complete turn (its last steps kept raw): the user message that starts it, kept raw before them. */
  readonly turnStart?: number;
  readonly prunedKept?: PrunedKept;
  /** The files of the working set the cut takes, carried after the notes (policy/working-set.ts; set by tiers/list.ts). */
  readonly workingSet?: readonly WorkingFile[];
  /** The files of the working set its cut takes that did not fit beside notes at their largest: carried when the notes written leave room (policy/working-set.ts `withFilesThatFit`). */
  readonly workingSetLeft?: readonly WorkingFile[];
}

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

export const summaryTier: ModelTier<SummaryPlan> = {
  name: 'summary',
  shownAs: 'summary',
  needsModel: true,

  plan({ candidate, sizes, budget, trigger, settings, sizeOf, total, cut, somethingOld, workingSet, keep }) {
    const { messages } = candidate;
    const head = headLength(messages);
    if (cut === null) {
      return budget !== null && total > budget ? { tier: 'too-large', needed: total } : { tier: 'nothing', reason: 'one-turn' };
    }
    if (!somethingOld) {
      const kept = totalSize(sizes, 0, head) + totalSize(sizes, cut, messages.length);
      return budget !== null && kept > budget ? { tier: 'too-large', needed: kept } : { tier: 'nothing', reason: 'only-summary' };
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
    const inPlace = budget === null || settings.filesInPlace === false ? keptCut : cutKeepingFiles(messages, measured, workingSet, keptCut, workingSetRoom(budget, settings));
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
  },

  // Over the target, a summary of one long turn's old steps may do better.
  settles: (plan, { target }) => plan.size <= target,

  // The epoch covers the cut, or past the kept results the summary forwards pruned.
  boundaryOf: (candidate, plan) => epochBoundary(candidate, Math.max(plan.cut, plan.prunedKept?.end ?? 0)),

  countsOf(candidate, plan) {
    const head = headLength(candidate.messages);
    const keptTurnStart = plan.turnStart !== undefined ? 1 : 0;
    return { old: plan.cut - head, kept: candidate.messages.length - plan.cut + keptTurnStart };
  },

  replacementOf(messages, plan, candidateEnd, text, written) {
    const head = messages.slice(0, headLength(messages));
    // The files of the working set the cut takes go after the notes, verbatim (transcript/compress/working-set.ts).
    const notes = withWorkingSetBlock(text, plan.workingSet);
    const pair = written === 'notes' ? summaryPair(notes) : truncationNotice(notes);
    // A cut through the last complete turn keeps the user message that starts it, so roles still alternate after the pair.
    const turnStart = plan.turnStart === undefined ? [] : [messages[plan.turnStart]!];
    // Kept turns whose old results the plan measured pruned are forwarded pruned.
    const kept = (plan.prunedKept?.messages ?? messages).slice(plan.cut, candidateEnd);
    return [...head, ...pair, ...turnStart, ...kept];
  },

  markedIndexesOf(messages, plan, candidateEnd, marked) {
    const head = headLength(messages);
    // The pair is written after the head; the first kept message comes after it.
    return [head, head + 1, ...keptMarks(marked, { keptFrom: plan.cut, keptAt: head + 2, candidateEnd })];
  },

  truncationText: (dropped, earlierNotes) => truncationText(`${dropped} earlier messages`, earlierNotes),

  summarizedLine: ({ plan, counts }, figures) => withCompressed(summarizedLine({ ...counts, ...figures }), plan.prunedKept?.compressed),

  truncatedLine: ({ plan, counts }, figures) => withCompressed(truncatedLine({ dropped: counts.old, kept: counts.kept, ...figures }), plan.prunedKept?.compressed),

  wouldLine: ({ plan, counts }, before) => wouldSummarizeLine({ tier: 'summary', ...counts, before, after: plan.size, compressed: plan.prunedKept?.compressed }),
};

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
