import type { ChatMessage } from '../../transcript/message.js';
import { headLength } from '../../transcript/groups.js';
import { estimateMessageTokens } from '../../transcript/tokens.js';
import { repeatedNewestResults } from '../../transcript/compress/compress.js';
import { type CompressPlan, planCompress } from './compress-tier.js';
import { type Candidate, type CompactionSettings, epochBoundary, trustedMarks } from './plan.js';
import { keptIndexes, workingSetOf } from './working-set.js';
import { type Sizes, totalSize } from './sizing.js';
import { protectedTailStart, stepsCut } from './plan-steps.js';

/**
 * The compression tier in the soft zone (DESIGN.md § Compression): compress
 * now when it frees enough, and say whether the crossing ahead can be
 * expected to compress (then no summary is prepared for it). Pure.
 */

interface SoftZoneSettings extends CompactionSettings {
  readonly softThreshold: number;
}

type RatioSizes = Sizes & { readonly ratio: number };

/**
 * The soft zone's compression of the results older than the protected tail,
 * when it alone frees at least `clear_at_least` tokens. Pruning is left to the
 * crossing, as before: it is what made a large result fit, and a history
 * pruned down below the soft threshold meets its next large result with no
 * summary prepared (the 48-turn run of issue 13 item 9 then waited three times).
 */
export function compressNow(candidate: Candidate, sizes: RatioSizes, budget: number | null, settings: SoftZoneSettings): { kind: 'compress'; plan: CompressPlan; boundary: { candidateEnd: number; sourceLength: number } } | null {
  const sizeOf = (message: ChatMessage): number => estimateMessageTokens(message) * sizes.ratio;
  const plan = planCompress(candidate, sizes, protectedTailStart(candidate, sizes, budget, settings), settings, sizeOf, { prune: false });
  return plan === null ? null : { kind: 'compress', plan, boundary: epochBoundary(candidate, plan.cut) };
}

/**
 * Whether the crossing ahead can be expected to be met by a compression, so
 * no summary is prepared for it: what will lie outside the protected tail
 * then (all but the last `keep_recent − growth` of today's history) frees
 * `clear_at_least` compressed, and enough to get back under the soft threshold, counting as freed the newest results of calls
 * the agent has already repeated (it re-reads the file it edits, re-runs the
 * test): its next repeat supersedes them. The re-read loop on an 8k window
 * otherwise prepared a summary in every other soft zone that a compression
 * made needless. When the agent stops repeating itself, the crossing
 * summarizes (and waits for it) as a history without the tier would.
 */
export function compressesAtCrossing(candidate: Candidate, sizes: RatioSizes, budget: number, settings: SoftZoneSettings): boolean {
  if (settings.compress === undefined || settings.compress === null) return false;
  const growth = Math.max(0, settings.threshold * budget - totalSize(sizes)) / budget;
  const cut = protectedTailStart(candidate, sizes, budget, { ...settings, keepRecent: Math.max(0, settings.keepRecent - growth) });
  if (cut === null) return false;
  const sizeOf = (message: ChatMessage): number => estimateMessageTokens(message) * sizes.ratio;
  const now = planCompress(candidate, sizes, cut, settings, sizeOf, { prune: false, atLeast: 0 })?.freed ?? 0;
  const head = headLength(candidate.messages);
  const expected = repeatedNewestResults(candidate.messages, { from: head, to: cut, settings: settings.compress.compress }).reduce((sum, index) => sum + sizes.perMessage[index]!, 0);
  // And what it leaves must be back under the soft threshold: once what no compression frees (the messages, the
  // markers, the newest copies) has grown that large, the crossing needs the summary after it prepared now.
  const freed = now + expected;
  return freed >= settings.compress.clearAtLeast && totalSize(sizes) - freed < settings.softThreshold * budget;
}

/**
 * At a crossing of one long turn (an agent loop under one user message: no
 * turn to cut at, so the tiers of planCompaction have nothing to do), the
 * compression of its steps older than those the steps tier keeps raw, when
 * it frees `clear_at_least` and alone gets under the threshold; else null and
 * the old steps are summarized.
 */
export function compressSteps(candidate: Candidate, sizes: Sizes, budget: number | null, settings: CompactionSettings, sizeOf: (message: ChatMessage) => number): CompressPlan | null {
  const cut = stepsCut(candidate, sizes, budget, settings)?.cut ?? null;
  const keep = keptIndexes(workingSetOf({ messages: candidate.messages, trusted: trustedMarks(candidate) }, budget, settings, sizeOf));
  const plan = planCompress(candidate, sizes, cut, settings, sizeOf, { keep });
  return plan !== null && (budget === null || plan.size < settings.threshold * budget) ? plan : null;
}
