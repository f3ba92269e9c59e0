import type { ChatMessage } from '../../transcript/message.js';

/**
 * A request's oversized tool results are pruned before anything else (see
 * oversized.ts), so a report of a later step (a summary, an epoch reused)
 * would leave it unsaid: the line names it first, as the step it was
 * (`pruned 1 oversized tool result, summarized 39 messages -> …`).
 */

/** How many messages `pruned` replaced (the pruning returns the others as the same objects). */
export function oversizedCount(original: readonly ChatMessage[], pruned: readonly ChatMessage[]): number {
  if (original === pruned) return 0;
  let count = 0;
  for (let index = 0; index < original.length; index++) if (original[index] !== pruned[index]) count++;
  return count;
}

/**
 * `line` with the pruning of `count` oversized results said first; observe
 * mode says what it would do. A request whose only step was that pruning
 * already has it as its whole line (`orOnly`, the pruned line with sizes).
 *
 * @example
 * withOversizedStep('epoch reused (21.5k -> 2.2k tokens)', 1, false, () => '')
 * // → 'pruned 1 oversized tool result, epoch reused (21.5k -> 2.2k tokens)'
 */
export function withOversizedStep(line: string | null, count: number, observing: boolean, orOnly: () => string): string | null {
  if (count === 0) return line;
  if (line === null) return orOnly();
  const step = `${observing ? 'would prune' : 'pruned'} ${count} oversized tool result${count === 1 ? '' : 's'}`;
  return `${step}, ${line}`;
}
