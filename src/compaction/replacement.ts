import type { ChatMessage } from '../transcript/message.js';
import { headLength } from '../transcript/groups.js';
import { mark } from '../transcript/marks.js';
import { withNotes } from './plan-steps.js';

/**
 * The messages compactor writes in place of what it compacts: the summary
 * pair, and the notice that stands where a summary would when it failed.
 * Both are marked, so they never anchor a task nor pass for a user's words.
 */

export const SUMMARY_ACKNOWLEDGEMENT = 'Understood; continuing from these notes.';

/** What replaces old turns: a user message with the notes and the assistant's acknowledgement, keeping alternation. */
export function summaryPair(notes: string): ChatMessage[] {
  return [
    { role: 'user', content: mark('summary', notes) },
    { role: 'assistant', content: mark('summary', SUMMARY_ACKNOWLEDGEMENT) },
  ];
}

/** What stands where a summary would when it could not be written: a marked notice pair. */
export function truncationNotice(text: string): ChatMessage[] {
  return [
    { role: 'user', content: mark('truncated', text) },
    { role: 'assistant', content: mark('truncated', 'Understood; continuing without them.') },
  ];
}

/** How much was dropped, and the notes from before it when there are any. */
export function truncationText(dropped: number, tier: 'summary' | 'steps', earlierNotes: string | null): string {
  const what = tier === 'steps' ? `${dropped} earlier messages of this task` : `${dropped} earlier messages`;
  const notes = earlierNotes === null ? '' : `\n\nNotes from before them:\n${earlierNotes}`;
  return `${what} were omitted here because they could not be summarized.${notes}`;
}

/**
 * What a summary or steps plan forwards in place of the candidate up to its
 * boundary: the head, then the notes (a summary pair, or a truncation notice
 * when the summary failed), then the kept messages up to `candidateEnd` (after
 * the user message of the turn a cut goes through, when it does). For
 * steps, the task anchor stays and the notes lead the first kept step.
 */
export function replacementOf(
  messages: readonly ChatMessage[],
  plan:
    | { readonly tier: 'summary'; readonly cut: number; readonly turnStart?: number; readonly prunedKept?: { readonly messages: readonly ChatMessage[] } }
    | { readonly tier: 'steps'; readonly cut: number; readonly anchor: number },
  candidateEnd: number,
  notes: string,
  strategy: 'summary' | 'truncated',
): ChatMessage[] {
  const head = messages.slice(0, headLength(messages));
  if (plan.tier === 'summary') {
    const pair = strategy === 'summary' ? summaryPair(notes) : truncationNotice(notes);
    // A cut through the last complete turn keeps the user message that starts it, so roles still alternate after the pair.
    const turnStart = plan.turnStart === undefined ? [] : [messages[plan.turnStart]!];
    // Kept turns whose old results the plan measured pruned are forwarded pruned.
    const kept = (plan.prunedKept?.messages ?? messages).slice(plan.cut, candidateEnd);
    return [...head, ...pair, ...turnStart, ...kept];
  }
  const marked = mark(strategy === 'summary' ? 'steps' : 'truncated', notes);
  return [...head, messages[plan.anchor]!, withNotes(messages[plan.cut]!, marked), ...messages.slice(plan.cut + 1, candidateEnd)];
}
