import type { ChatMessage } from '../../transcript/message.js';
import { mark } from '../../transcript/marks.js';
import { type WorkingFile, workingSetBlock } from '../../transcript/compress/working-set.js';
import type { Epoch } from '../types.js';
import type { Candidate } from './plan.js';

/**
 * The messages compactor writes in place of what it compacts: the summary
 * pair, and the notice that stands where a summary would when it failed.
 * Both are marked, so they never anchor a task nor pass for a user's words.
 */

export { summaryPair } from '../../transcript/marks.js';

/** What stands where a summary would when it could not be written: a marked notice pair. */
export function truncationNotice(text: string): ChatMessage[] {
  return [
    { role: 'user', content: mark('truncated', text) },
    { role: 'assistant', content: mark('truncated', 'Understood; continuing without them.') },
  ];
}

/** A truncation notice's text: what was dropped (`12 earlier messages`), and the notes from before it when there are any. */
export function truncationText(dropped: string, earlierNotes: string | null): string {
  const notes = earlierNotes === null ? '' : `\n\nNotes from before them:\n${earlierNotes}`;
  return `${dropped} were omitted here because they could not be summarized.${notes}`;
}

/** The notes (or a truncation notice's text) followed by the files of the working set a plan carries, verbatim; the text alone when none. */
export function withWorkingSetBlock(text: string, files: readonly WorkingFile[] | undefined): string {
  return `${text}${workingSetBlock(files ?? [])}`;
}

/**
 * Where a replacement puts the genuine marks (`marked`, candidate indexes)
 * of the messages it keeps: those from `keptFrom` up to `candidateEnd`,
 * forwarded from `keptAt` on.
 */
export function keptMarks(marked: ReadonlySet<number>, { keptFrom, keptAt, candidateEnd }: { keptFrom: number; keptAt: number; candidateEnd: number }): number[] {
  return [...marked].filter((index) => index >= keptFrom && index < candidateEnd).map((index) => keptAt + index - keptFrom);
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
  { tier, seesWholeHistory }: { readonly tier: Epoch['strategy']; readonly seesWholeHistory: boolean },
): Epoch {
  // What applies only to a history that has what it was made from (a compression's markers name later calls) sees all of this one.
  const seen = seesWholeHistory ? hashes.length - 1 : boundary.sourceLength;
  const seenLength = Math.max(seen, candidate.epoch?.seenLength ?? 0);
  return {
    key: hashes[seenLength]!,
    sourceLength: boundary.sourceLength,
    seenLength,
    replacement: pruned.slice(0, boundary.candidateEnd),
    ...(candidate.epoch?.marked === undefined ? {} : { marked: candidate.epoch.marked }),
    notes: candidate.epoch?.notes ?? null,
    strategy: tier,
    report,
    // Made on top of a truncation (within its back-off), it stands no longer than the truncation.
    ...(candidate.epoch?.expiresAt === undefined ? {} : { expiresAt: candidate.epoch.expiresAt }),
  };
}
