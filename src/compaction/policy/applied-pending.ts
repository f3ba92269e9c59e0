import type { ChatMessage } from '../../transcript/message.js';
import { headLength, stepRanges, turnRanges } from '../../transcript/groups.js';
import { estimateMessageTokens } from '../../transcript/tokens.js';
import type { Epoch } from '../types.js';
import type { Budget } from './budget.js';
import { compressForBudget } from './compress-tier.js';
import { compressedKept, keptPartOf } from './kept-part.js';
import { type CompactionSettings, candidateOf } from './plan.js';
import { protectedTailStart } from './plan-steps.js';
import { withCompressed } from './report.js';
import { sizesOf } from './sizing.js';
import { workingSetIndexes } from './working-set.js';

/**
 * A summary prepared in the background is applied at the crossing, in one
 * prefix move: the moment to compress what it keeps too. It was written
 * turns ago; since then the agent re-read and re-ran, and the results it kept
 * or that came after it are superseded now. An agent whose fixed part and
 * protected tail already fill the soft zone (opencode, qwen-code: every
 * summary lands there, so the next one is prepared at once and no compression
 * is ever decided while it is pending) would otherwise never compress at all.
 * Decided once, here, and stored as the epoch in use: replayed byte for byte
 * like any other. Pure.
 */

interface History {
  readonly messages: readonly ChatMessage[];
  /** `hashes[i]` names the first `i` messages. */
  readonly hashes: readonly string[];
  readonly toolsEstimate: number;
  readonly budget: Budget;
}

/**
 * The pending epoch in use, with the results it leaves compressed as a
 * summary's kept part is (`keptPartOf`): before the protected tail as the tier
 * does, in the tail's complete turns (of one long turn: its steps but the
 * last) only what a newer kept copy holds. The epoch as it was (in use) when
 * the tier is off or there is nothing to compress.
 */
export function appliedPending(epoch: Epoch, history: History, settings: CompactionSettings, ratio: number): Epoch {
  const applied: Epoch = { ...epoch, pending: false };
  const tier = compressForBudget(settings.compress, history.budget.tokens);
  if (tier === null) return applied;
  const candidate = candidateOf(history.messages, applied);
  const sizes = sizesOf(candidate.messages, history.toolsEstimate, ratio);
  const cut = protectedTailStart(candidate, sizes, history.budget.tokens, settings);
  if (cut === null) return applied;
  const lastTurnStart = turnRanges(candidate.messages, headLength(candidate.messages)).at(-1)!.start;
  // One long turn: its kept steps but the last are complete, and what a later kept step holds anew is lost to none.
  const losslessEnd = lastTurnStart < cut ? (stepRanges(candidate.messages, { start: cut, end: candidate.messages.length }).at(-1)?.start ?? cut) : lastTurnStart;
  const sizeOf = (message: ChatMessage): number => estimateMessageTokens(message) * ratio;
  // The working set stays raw as in the tiers: no pruning of a large file read, no clearing of the newest copy of a file.
  const keep = workingSetIndexes(candidate, history.budget.tokens, settings, sizeOf);
  const part = keptPartOf(candidate.messages, sizes, { cut, lastTurnStart, losslessEnd }, { pruneMaxResultChars: settings.pruneMaxResultChars, compress: tier, keep }, sizeOf);
  if (part.compressed.size === 0) return applied;
  // The epoch now covers up to its last compressed result; its markers name later calls, so it applies only to a history that has them.
  const candidateEnd = Math.max(Math.max(...part.compressed) + 1, candidate.replacementLength);
  const seenLength = Math.max(epoch.seenLength, history.hashes.length - 1);
  return {
    ...applied,
    key: history.hashes[seenLength]!,
    seenLength,
    sourceLength: candidate.sourceStart + (candidateEnd - candidate.replacementLength),
    replacement: part.messages.slice(0, candidateEnd),
    report: withCompressed(epoch.report, compressedKept(part, sizes, 0, candidateEnd)),
  };
}
