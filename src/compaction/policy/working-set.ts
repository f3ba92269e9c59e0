import type { ChatMessage } from '../../transcript/message.js';
import { balanceCut, headLength, turnRanges } from '../../transcript/groups.js';
import { DEFAULT_READ_TOOLS } from '../../transcript/compress/calls.js';
import { type WorkingFile, fitting, newestReads, workingSetBlock } from '../../transcript/compress/working-set.js';
import { type Candidate, trustedMarks } from './plan.js';
import { type Sizes, totalSize } from './sizing.js';

/**
 * The working set in the tiers (DESIGN.md § Compression, the working set):
 * the newest copy of each file the agent read, newest first, up to
 * `compaction.working_set` × budget tokens, stays raw through every tier. The
 * prune and compression tiers leave its results alone (`keptIndexes`); a
 * summary or steps plan whose cut would take some of them carries them after
 * its notes, and counts what they cost (`withWorkingSet`, which
 * tiers/list.ts applies to the plan of every tier that writes notes). Pure.
 */

interface Plannable {
  readonly messages: readonly ChatMessage[];
  /** Where compactor's marks are genuine: the messages that may carry files of earlier notes. */
  readonly trusted: ReadonlySet<number>;
}

interface WorkingSetSettings {
  /** The share of the budget the working set may take; 0 or absent: off. */
  readonly workingSet?: number;
  /** Its room is at least this many tokens, never more than half the budget. */
  readonly workingSetMinTokens?: number;
  /** The compression tier's read tools, when it is on: what counts as a read. */
  readonly compress?: { readonly compress: { readonly readTools?: readonly string[] } } | null;
  readonly compressKept?: { readonly compress: { readonly readTools?: readonly string[] } } | null;
}

/**
 * The tokens the working set may take of `budget`: its share, but never less
 * than `workingSetMinTokens` nor more than half the budget. One share does not
 * fit every window: on a 4k window a quarter (768 tokens) holds one of the
 * three files an agent edits, while on a 24k one half (9k tokens) carried so
 * much that Codex summarized 11 times in 16 requests (7 at a quarter).
 */
export function workingSetRoom(budget: number, settings: WorkingSetSettings): number {
  const share = settings.workingSet ?? 0;
  if (share <= 0) return 0;
  return Math.min(budget / 2, Math.max(share * budget, settings.workingSetMinTokens ?? 0));
}

/** The working set of a candidate, newest first; none without a budget or with the share at 0. */
export function workingSetOf(candidate: Plannable, budget: number | null, settings: WorkingSetSettings, sizeOf: (message: ChatMessage) => number): WorkingFile[] {
  const room = budget === null ? 0 : workingSetRoom(budget, settings);
  if (room <= 0) return [];
  const readTools = (settings.compress ?? settings.compressKept)?.compress.readTools ?? DEFAULT_READ_TOOLS;
  return fitting(newestReads(candidate.messages, candidate.trusted, readTools), room, (text) => sizeOf({ role: 'tool', content: text }));
}

/** The indexes of the tool results of a working set (not the files carried by earlier notes): no tier prunes or compresses them. */
export function keptIndexes(files: readonly WorkingFile[]): ReadonlySet<number> {
  return new Set(files.filter((file) => !file.carried).map((file) => file.index));
}

/**
 * The indexes of the working set's tool results in a candidate: what the
 * compressions made outside the tier list (the soft zone's, a pending
 * summary's applied at the crossing) leave alone, as the tiers do.
 */
export function workingSetIndexes(candidate: Pick<Candidate, 'messages' | 'epoch'>, budget: number | null, settings: WorkingSetSettings, sizeOf: (message: ChatMessage) => number): ReadonlySet<number> {
  return keptIndexes(workingSetOf({ messages: candidate.messages, trusted: trustedMarks(candidate) }, budget, settings, sizeOf));
}

/** A plan of a tier that writes notes, as the working set reads it: where it cuts, what it expects to cost, the files it carries. */
interface CutPlan {
  readonly cut: number;
  readonly size: number;
  readonly workingSet?: readonly WorkingFile[];
  readonly workingSetLeft?: readonly WorkingFile[];
}

/**
 * The plan of a tier that writes notes (a summary, steps) with the files of
 * the working set its cut would take carried after its notes: those read
 * before the cut, and those earlier notes carried. Its size counts them;
 * when that would exceed the budget the oldest go first.
 */
export function withWorkingSet<P extends CutPlan>(plan: P, files: readonly WorkingFile[], budget: number | null, sizeOf: (message: ChatMessage) => number): P {
  const carried = files.filter((file) => file.carried || file.index < plan.cut);
  const cost = (kept: readonly WorkingFile[]): number => (kept.length === 0 ? 0 : sizeOf({ role: 'user', content: workingSetBlock(kept) }));
  const left: WorkingFile[] = [];
  while (carried.length > 0 && budget !== null && plan.size + cost(carried) > budget) left.unshift(carried.pop()!);
  // Those left out may still fit once the notes are written: their size counts them at their largest (`withFilesThatFit`).
  const leftOut = left.length === 0 ? {} : { workingSetLeft: left };
  if (carried.length === 0) return { ...plan, ...leftOut };
  return { ...plan, size: plan.size + cost(carried), workingSet: carried, ...leftOut };
}

/**
 * The plan with the files {@link withWorkingSet} left out for room carried too, as many as `fits` (the epoch
 * with the notes as written, within the budget) allows, newest first. The plan counts the notes at their
 * largest (512 tokens on a 4k window) where they come back at about 100: on the 4k re-read loop a summary
 * 9 tokens over the budget by that count left out one of the three files the agent edits (issue 32).
 */
export function withFilesThatFit<P extends CutPlan>(plan: P, fits: (plan: P) => boolean): P {
  const left = plan.workingSetLeft ?? [];
  for (let count = left.length; count > 0; count--) {
    const wider = { ...plan, workingSet: [...(plan.workingSet ?? []), ...left.slice(0, count)], workingSetLeft: left.slice(count) };
    if (fits(wider)) return wider;
  }
  return plan;
}

/**
 * Where a summary cuts so that the working set's files read before `cut`
 * stay in place: the start of the turn of the oldest of them (newest first)
 * whose turns, from there to `cut`, cost at most `share` tokens. In place, a
 * later re-read supersedes a file (the compression tier makes it a marker);
 * carried after the notes, the older copy would stay beside the newer one
 * until the next summary. `cut` when none fits.
 */
export function cutKeepingFiles(messages: readonly ChatMessage[], sizes: Sizes, files: readonly WorkingFile[], cut: number, share: number): number {
  const head = headLength(messages);
  const starts = turnRanges(messages, head).map((range) => range.start).filter((start) => start > head);
  let best = cut;
  for (const file of files) {
    if (file.carried || file.index >= cut) continue;
    const start = starts.filter((at) => at <= file.index).at(-1);
    if (start === undefined || start >= best) continue;
    if (totalSize(sizes, start, cut) > share) break;
    best = start;
  }
  return best === cut ? cut : balanceCut(messages, best);
}
