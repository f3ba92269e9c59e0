import type { ChatMessage } from '../../transcript/message.js';
import { pruneToolResults } from '../../transcript/prune.js';
import { prunedLine } from './report.js';

/**
 * Oversized tool results: pruned in every request before anything else, and
 * said in its report line. A report of a later step (a summary, an epoch
 * reused) would leave that pruning unsaid, so the line names it first, as the
 * step it was (`pruned 1 oversized tool result, summarized 39 messages -> …`).
 */

/** Below this, pruning an oversized result would leave too little of it to be of use. */
const MIN_OVERSIZED_RESULT_CHARS = 1024;

/**
 * A tool result larger than a quarter of the budget is pruned to that size in
 * every request: it could never be sent whole. The limit is in characters of
 * the bytes/4 estimate (a quarter of the budget in tokens is about as many
 * characters as the budget has tokens), never of the learned ratio, so the
 * same history is pruned the same way from one request to the next.
 * Returns the input array itself when nothing was pruned.
 */
export function pruneOversizedResults(messages: ChatMessage[], budgetTokens: number | null): ChatMessage[] {
  if (budgetTokens === null) return messages;
  return pruneToolResults(messages, Math.max(MIN_OVERSIZED_RESULT_CHARS, Math.floor(budgetTokens)));
}

/** How many messages `pruned` replaced (the pruning returns the others as the same objects). */
export function oversizedCount(original: readonly ChatMessage[], pruned: readonly ChatMessage[]): number {
  if (original === pruned) return 0;
  let count = 0;
  for (let index = 0; index < original.length; index++) if (original[index] !== pruned[index]) count++;
  return count;
}

/** The report line of a request whose oversized results were pruned (and nothing else). */
export function prunedReport(before: ChatMessage[], after: ChatMessage[], estimateOf: (messages: readonly ChatMessage[]) => number, ratio: number): string {
  const results = oversizedCount(before, after);
  // "oversized": these are pruned in every request, whatever the tier (README, the x-compactor header).
  return prunedLine({ results, before: estimateOf(before) * ratio, after: estimateOf(after) * ratio }).replace(/^pruned (\d+) /, 'pruned $1 oversized ');
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
