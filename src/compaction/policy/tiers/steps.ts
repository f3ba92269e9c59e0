import { headLength } from '../../../transcript/groups.js';
import { mark } from '../../../transcript/marks.js';
import { compressSteps } from '../compress-ahead.js';
import { epochBoundary } from '../plan.js';
import { planSteps, type StepsPlan, withNotes } from '../plan-steps.js';
import { keptMarks, truncationText, withWorkingSetBlock } from '../replacement.js';
import { summarizedLine, truncatedLine, wouldSummarizeLine } from '../report.js';
import type { ModelTier } from './tier.js';

/**
 * A summary of old steps (its cut and size are plan-steps.ts's): when
 * one long turn is the problem (an agent loop under a single user message),
 * its old steps summarized, the task anchor verbatim, the last steps raw, the
 * notes at the head of the first kept assistant message. Asked when the
 * tiers before it found nothing to do, too large, or a summary over the
 * target; it takes a summary's place only when it does better.
 */

export const stepsTier: ModelTier<StepsPlan> = {
  name: 'steps',
  // A summary of old turns or of old steps is a summary on the dashboard's page.
  shownAs: 'summary',
  needsModel: true,

  plan({ candidate, sizes, budget, trigger, settings, sizeOf, keep }, before) {
    if (before?.tier === 'nothing' && trigger === 'count') return null;
    const summary = before?.tier === 'summary' ? before : null;
    // One long turn: its old steps are compressed, when that is enough, before they are summarized.
    const compressed = trigger === 'size' && summary === null ? compressSteps(candidate, sizes, budget, settings, sizeOf, keep) : null;
    if (compressed !== null) return compressed;
    const steps = planSteps(candidate, sizes, budget, settings);
    if (steps === null) return null;
    if (summary !== null && steps.size >= summary.size) return null;
    if (budget !== null && steps.size > budget) {
      return summary !== null ? null : { tier: 'too-large', needed: steps.size - settings.summaryMaxTokens };
    }
    return steps;
  },

  settles: () => true,

  // The first kept message carries the notes: the epoch covers it too.
  boundaryOf: (candidate, plan) => epochBoundary(candidate, plan.cut + 1),

  countsOf(candidate, plan) {
    const head = headLength(candidate.messages);
    return { old: plan.cut - head - 1, kept: candidate.messages.length - plan.cut };
  },

  replacementOf(messages, plan, candidateEnd, text, written) {
    const head = messages.slice(0, headLength(messages));
    // The files of the working set the cut takes go after the notes, verbatim (transcript/compress/working-set.ts).
    const marked = mark(written === 'notes' ? 'steps' : 'truncated', withWorkingSetBlock(text, plan.workingSet));
    return [...head, messages[plan.anchor]!, withNotes(messages[plan.cut]!, marked), ...messages.slice(plan.cut + 1, candidateEnd)];
  },

  markedIndexesOf(messages, plan, candidateEnd, marked) {
    const head = headLength(messages);
    // The notes lead the message after the anchor; the next kept message comes after it.
    return [head + 1, ...keptMarks(marked, { keptFrom: plan.cut + 1, keptAt: head + 2, candidateEnd })];
  },

  truncationText: (dropped, earlierNotes) => truncationText(`${dropped} earlier messages of this task`, earlierNotes),

  summarizedLine: ({ counts }, figures) => summarizedLine({ ...counts, ...figures }),

  truncatedLine: ({ counts }, figures) => truncatedLine({ dropped: counts.old, kept: counts.kept, ...figures }),

  wouldLine: ({ plan, counts }, before) => wouldSummarizeLine({ tier: 'steps', ...counts, before, after: plan.size }),
};
