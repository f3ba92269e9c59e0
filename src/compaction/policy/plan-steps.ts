import type { ChatMessage } from '../../transcript/message.js';
import { headLength, stepRanges, taskAnchorIndex } from '../../transcript/groups.js';
import { type Candidate, type CompactionSettings, chooseCut } from './plan.js';
import { type Sizes, totalSize } from './sizing.js';
import type { WorkingFile } from '../../transcript/compress/working-set.js';

/**
 * Tier 3: when one long turn is the problem (an agent loop under a single user
 * message), summarize its old steps. The task anchor stays verbatim, the last
 * steps stay raw, and the notes go at the head of the first kept assistant
 * message, so no message is added and no pair moves.
 */

/** The mark and blank line around the notes, or the longer notice a failed summary leaves instead (about 30 tokens). */
const STEPS_NOTES_OVERHEAD_TOKENS = 32;

export interface StepsPlan {
  readonly tier: 'steps';
  /** The task anchor (the last real user message), kept verbatim. */
  readonly anchor: number;
  /** The first kept step: the assistant message that will carry the notes. */
  readonly cut: number;
  /** The expected size after compaction, with the notes at their largest. */
  readonly size: number;
  /** The files of the working set the cut would take, carried after the notes (policy/working-set.ts). */
  readonly workingSet?: readonly WorkingFile[];
  /** The files of the working set its cut takes that did not fit beside notes at their largest: carried when the notes written leave room (policy/working-set.ts `withFilesThatFit`). */
  readonly workingSetLeft?: readonly WorkingFile[];
}

/**
 * Plans a steps compaction of the candidate's current turn, or returns null
 * when it has no old step to summarize (fewer than two steps, or all of them
 * fit the recent part), or when notes at their largest would cost as much as
 * the old steps they replace. Keeps the last steps that fit `keepRecent × budget`,
 * at least one.
 */
export function planSteps(candidate: Candidate, sizes: Sizes, budget: number | null, settings: CompactionSettings): StepsPlan | null {
  const { messages } = candidate;
  const head = headLength(messages);
  const found = stepsCut(candidate, sizes, budget, settings);
  if (found === null) return null;
  const { anchor, cut } = found;
  const size =
    totalSize(sizes, 0, head) + sizes.perMessage[anchor]! + settings.summaryMaxTokens + STEPS_NOTES_OVERHEAD_TOKENS + totalSize(sizes, cut, messages.length);
  // Notes that may cost as much as the steps they replace gain nothing (and a steps compaction removes no message).
  if (size >= totalSize(sizes)) return null;
  return { tier: 'steps', anchor, cut, size };
}

/**
 * Where a steps compaction cuts the current turn: the first of its last steps
 * that fit `keepRecent × budget` (at least the last one, never the first);
 * null when it has fewer than two steps.
 */
export function stepsCut(candidate: Candidate, sizes: Sizes, budget: number | null, settings: CompactionSettings): { anchor: number; cut: number } | null {
  const { messages } = candidate;
  const anchor = taskAnchorIndex(messages);
  if (anchor < headLength(messages)) return null;
  const steps = stepRanges(messages, { start: anchor + 1, end: messages.length });
  if (steps.length < 2) return null;
  let first = steps.length - 1; // keep at least the last step
  if (budget !== null) {
    const keepTokens = settings.keepRecent * budget;
    while (first > 1 && totalSize(sizes, steps[first - 1]!.start, messages.length) <= keepTokens) first--;
  }
  return { anchor, cut: steps[first]!.start };
}

/**
 * Where the protected tail starts, which the compression tier never touches:
 * what a summary would keep raw (`chooseCut`), or, in an agent loop under one
 * user message (no turn to cut at), what the steps tier would keep raw. Null
 * when there is neither.
 */
export function protectedTailStart(candidate: Candidate, sizes: Sizes, budget: number | null, settings: CompactionSettings): number | null {
  return chooseCut(candidate, sizes, budget, settings) ?? stepsCut(candidate, sizes, budget, settings)?.cut ?? null;
}

/**
 * The first kept assistant message with notes at the head of its content,
 * followed by a blank line (a first text part when the content is a list).
 */
export function withNotes(message: ChatMessage, notes: string): ChatMessage {
  const { content } = message;
  if (Array.isArray(content)) return { ...message, content: [{ type: 'text', text: `${notes}\n\n` }, ...content] };
  const text = typeof content === 'string' && content !== '' ? `${notes}\n\n${content}` : notes;
  return { ...message, content: text };
}
