import type { ChatMessage } from '../../transcript/message.js';
import { pruneToolResults } from '../../transcript/prune.js';
import { prunedLine } from './report.js';

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

/** The report line of a request whose oversized results were pruned (and nothing else). */
export function prunedReport(before: ChatMessage[], after: ChatMessage[], estimateOf: (messages: readonly ChatMessage[]) => number, ratio: number): string {
  let results = 0;
  for (let index = 0; index < before.length; index++) if (before[index] !== after[index]) results++;
  // "oversized": these are pruned in every request, whatever the tier (README, the x-compactor header).
  return prunedLine({ results, before: estimateOf(before) * ratio, after: estimateOf(after) * ratio }).replace(/^pruned (\d+) /, 'pruned $1 oversized ');
}
