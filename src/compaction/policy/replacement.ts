import type { ChatMessage } from '../../transcript/message.js';
import { headLength } from '../../transcript/groups.js';
import { mark } from '../../transcript/marks.js';
import { type WorkingFile, workingSetBlock } from '../../transcript/compress/working-set.js';
import { withNotes } from './plan-steps.js';
import type { Epoch } from '../types.js';
import type { Candidate } from './plan.js';
import { compressedLine, prunedLine } from './report.js';

/**
 * The messages compactor writes in place of what it compacts: the summary
 * pair, and the notice that stands where a summary would when it failed.
 * Both are marked, so they never anchor a task nor pass for a user's words.
 */

const SUMMARY_ACKNOWLEDGEMENT = 'Understood; continuing from these notes.';

/** What replaces old turns: a user message with the notes and the assistant's acknowledgement, keeping alternation. */
function summaryPair(notes: string): ChatMessage[] {
  return [
    { role: 'user', content: mark('summary', notes) },
    { role: 'assistant', content: mark('summary', SUMMARY_ACKNOWLEDGEMENT) },
  ];
}

/** What stands where a summary would when it could not be written: a marked notice pair. */
function truncationNotice(text: string): ChatMessage[] {
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
 * Where the replacement {@link replacementOf} builds carries compactor's
 * marks: the notes it writes, and the genuine marks of the candidate
 * (`marked`, candidate indexes) among the messages it keeps.
 */
export function markedIndexesOf(
  messages: readonly ChatMessage[],
  plan: { readonly tier: 'summary' | 'steps'; readonly cut: number },
  candidateEnd: number,
  marked: ReadonlySet<number>,
): number[] {
  const head = headLength(messages);
  // The first kept message after the notes: after the pair, or after the anchor and the message the steps notes lead.
  const [written, keptFrom, keptAt] = plan.tier === 'summary' ? [[head, head + 1], plan.cut, head + 2] : [[head + 1], plan.cut + 1, head + 2];
  const kept = [...marked].filter((index) => index >= keptFrom && index < candidateEnd).map((index) => keptAt + index - keptFrom);
  return [...written, ...kept];
}

/**
 * What a summary or steps plan forwards in place of the candidate up to its
 * boundary: the head, then the notes (a summary pair, or a truncation notice
 * when the summary failed), then the kept messages up to `candidateEnd` (after
 * the user message of the turn a cut goes through, when it does). For
 * steps, the task anchor stays and the notes lead the first kept step. The
 * files of the working set the plan carries follow the notes, verbatim.
 */
export function replacementOf(
  messages: readonly ChatMessage[],
  plan:
    | { readonly tier: 'summary'; readonly cut: number; readonly turnStart?: number; readonly prunedKept?: { readonly messages: readonly ChatMessage[] }; readonly workingSet?: readonly WorkingFile[] }
    | { readonly tier: 'steps'; readonly cut: number; readonly anchor: number; readonly workingSet?: readonly WorkingFile[] },
  candidateEnd: number,
  written: string,
  strategy: 'summary' | 'truncated',
): ChatMessage[] {
  const head = messages.slice(0, headLength(messages));
  // The files of the working set the cut takes go after the notes, verbatim (transcript/compress/working-set.ts).
  const notes = `${written}${workingSetBlock(plan.workingSet ?? [])}`;
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

/**
 * The epoch a prune or a compression makes: `pruned` (the candidate with old
 * results pruned or compressed, every message in place) up to `candidateEnd`. It writes nothing new, but
 * keeps the epoch in use's notes and marks where they were, so it is keyed
 * by what those were written from, at least.
 */
export function prunedEpoch(
  hashes: readonly string[],
  candidate: Candidate,
  pruned: readonly ChatMessage[],
  boundary: { readonly candidateEnd: number; readonly sourceLength: number },
  report: string,
  strategy: 'prune' | 'compress' = 'prune',
): Epoch {
  // A compression's markers name later calls, which hold the newer copies: it applies only to a history that has them (all of this one).
  const seen = strategy === 'compress' ? hashes.length - 1 : boundary.sourceLength;
  const seenLength = Math.max(seen, candidate.epoch?.seenLength ?? 0);
  return {
    key: hashes[seenLength]!,
    sourceLength: boundary.sourceLength,
    seenLength,
    replacement: pruned.slice(0, boundary.candidateEnd),
    ...(candidate.epoch?.marked === undefined ? {} : { marked: candidate.epoch.marked }),
    notes: candidate.epoch?.notes ?? null,
    strategy,
    report,
    // Made on top of a truncation (within its back-off), it stands no longer than the truncation.
    ...(candidate.epoch?.expiresAt === undefined ? {} : { expiresAt: candidate.epoch.expiresAt }),
  };
}

/** A decision made with no model call: old results pruned or compressed, every message in place. */
type ModelFree =
  | { readonly kind: 'prune'; readonly plan: { readonly messages: readonly ChatMessage[]; readonly pruned: number; readonly size: number }; readonly boundary: Boundary }
  | { readonly kind: 'compress'; readonly plan: { readonly messages: readonly ChatMessage[]; readonly results: number; readonly size: number }; readonly boundary: Boundary };

type Boundary = { readonly candidateEnd: number; readonly sourceLength: number };

/** The epoch a prune or a compression decision makes, its report line said from `before` (the request's size) to the plan's. */
export function modelFreeEpoch(hashes: readonly string[], candidate: Candidate, decision: ModelFree, before: number): Epoch {
  const { plan } = decision;
  const results = decision.kind === 'prune' ? decision.plan.pruned : decision.plan.results;
  const report = (decision.kind === 'prune' ? prunedLine : compressedLine)({ results, before, after: plan.size });
  return prunedEpoch(hashes, candidate, plan.messages, decision.boundary, report, decision.kind);
}
