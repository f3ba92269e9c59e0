import type { ChatMessage } from '../../transcript/message.js';
import type { Epoch } from '../types.js';
import { headLength } from '../../transcript/groups.js';
import { estimateMessageTokens } from '../../transcript/tokens.js';
import { repeatedNewestResults } from '../../transcript/compress/compress.js';
import { type CompressPlan, planCompress } from './compress-tier.js';
import { type Candidate, type CompactionSettings, epochBoundary, trustedMarks } from './plan.js';
import { type Sizes, totalSize } from './sizing.js';
import { protectedTailStart, stepsCut } from './plan-steps.js';
import { workingSetIndexes } from './working-set.js';
import { MIN_FREED_SHARE, lastStepTokens } from './cost.js';

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
export function compressNow(
  candidate: Candidate,
  sizes: RatioSizes,
  budget: number | null,
  settings: SoftZoneSettings,
  // By cost (decide.ts), any compression is weighed, not only one that frees `clear_at_least`.
  { atLeast }: { atLeast?: number } = {},
): { kind: 'compress'; plan: CompressPlan; boundary: { candidateEnd: number; sourceLength: number } } | null {
  const sizeOf = (message: ChatMessage): number => estimateMessageTokens(message) * sizes.ratio;
  // The working set stays raw here as in the tiers: `compress.clear` would otherwise clear the newest copy of a file.
  const keep = workingSetIndexes(candidate, budget, settings, sizeOf);
  const plan = planCompress(candidate, sizes, protectedTailStart(candidate, sizes, budget, settings), settings, sizeOf, { prune: false, keep, trusted: trustedMarks(candidate), ...(atLeast === undefined ? {} : { atLeast }) });
  return plan === null ? null : { kind: 'compress', plan, boundary: epochBoundary(candidate, plan.cut) };
}

/**
 * At a crossing with a summary pending that would leave the history in the
 * soft zone, the compression that alone gets it back under the threshold,
 * freeing at least what the newest step added and {@link MIN_FREED_SHARE} of
 * the budget (less buys no request: cost.ts); else null, and the pending
 * summary applies. The working set stays raw, as in {@link compressNow}.
 * Where the working set fills half the budget (a 4k window's 1,536 tokens),
 * a summary applied at each crossing freed about a step, left the history in
 * the soft zone, and the next summary was prepared at once: the re-read loop
 * made 57 summary calls. The compression covers more of the history than the
 * pending summary, which the lookup then drops as stale: a summary that gets
 * out of the soft zone is not given up for it.
 */
export function compressesInstead(candidate: Candidate, sizes: RatioSizes, budget: number | null, settings: SoftZoneSettings, pending: Epoch): ReturnType<typeof compressNow> {
  if (budget === null) return null;
  // A summary that gets the history out of the soft zone applies: a compression instead leaves it behind, unused.
  const applied = appliedSize(candidate, sizes, pending);
  if (applied === null || applied < settings.softThreshold * budget) return null;
  const compressed = compressNow(candidate, sizes, budget, settings, { atLeast: 0 });
  if (compressed === null || compressed.plan.size >= settings.threshold * budget) return null;
  return compressed.plan.freed >= Math.max(MIN_FREED_SHARE * budget, lastStepTokens(candidate, sizes)) ? compressed : null;
}

/**
 * The size of the candidate with `pending` applied: its replacement (sized with the candidate's ratio) and what
 * follows it; null when the pending epoch does not start within the candidate's raw part.
 */
function appliedSize(candidate: Candidate, sizes: RatioSizes, pending: Epoch): number | null {
  const from = pending.sourceLength - candidate.sourceStart + candidate.replacementLength;
  if (from < candidate.replacementLength || from > candidate.messages.length) return null;
  const replacement = pending.replacement.reduce((sum, message) => sum + estimateMessageTokens(message) * sizes.ratio, 0);
  return sizes.fixed + replacement + totalSize(sizes, from);
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
  return crossingCompression(candidate, sizes, budget, settings) !== null;
}

/**
 * The compression the crossing ahead can be expected to make (see
 * {@link compressesAtCrossing}): what it frees, and the first index it
 * changes (for its cost, policy/cost.ts); null when it cannot be expected.
 */
export function crossingCompression(candidate: Candidate, sizes: RatioSizes, budget: number, settings: SoftZoneSettings): { freed: number; firstChange: number } | null {
  if (settings.compress === undefined || settings.compress === null) return null;
  const growth = Math.max(0, settings.threshold * budget - totalSize(sizes)) / budget;
  const cut = protectedTailStart(candidate, sizes, budget, { ...settings, keepRecent: Math.max(0, settings.keepRecent - growth) });
  if (cut === null) return null;
  const sizeOf = (message: ChatMessage): number => estimateMessageTokens(message) * sizes.ratio;
  // What the crossing's compression will free: the tier leaves the working set alone there.
  const plan = planCompress(candidate, sizes, cut, settings, sizeOf, { prune: false, atLeast: 0, keep: workingSetIndexes(candidate, budget, settings, sizeOf), trusted: trustedMarks(candidate) });
  const now = plan?.freed ?? 0;
  const head = headLength(candidate.messages);
  const repeated = repeatedNewestResults(candidate.messages, { from: head, to: cut, settings: settings.compress.compress });
  const expected = repeated.reduce((sum, index) => sum + sizes.perMessage[index]!, 0);
  // And what it leaves must be back under the soft threshold: once what no compression frees (the messages, the
  // markers, the newest copies) has grown that large, the crossing needs the summary after it prepared now.
  const freed = now + expected;
  if (freed < settings.compress.clearAtLeast || totalSize(sizes) - freed >= settings.softThreshold * budget) return null;
  const changedAt = plan === null ? cut : plan.messages.findIndex((message, index) => message !== candidate.messages[index]);
  return { freed, firstChange: Math.min(changedAt === -1 ? cut : changedAt, ...repeated) };
}

/**
 * At a crossing of one long turn (an agent loop under one user message: no
 * turn to cut at, so the tiers of planCompaction have nothing to do), the
 * compression of its steps older than those the steps tier keeps raw, when
 * it frees `clear_at_least` and alone gets under the threshold; else null and
 * the old steps are summarized. The results of `keep` (the working set) stay raw.
 */
export function compressSteps(
  candidate: Candidate,
  sizes: Sizes,
  budget: number | null,
  settings: CompactionSettings,
  sizeOf: (message: ChatMessage) => number,
  keep: ReadonlySet<number>,
): CompressPlan | null {
  const cut = stepsCut(candidate, sizes, budget, settings)?.cut ?? null;
  const plan = planCompress(candidate, sizes, cut, settings, sizeOf, { keep, trusted: trustedMarks(candidate) });
  return plan !== null && (budget === null || plan.size < settings.threshold * budget) ? plan : null;
}
