import type { ChatMessage } from '../../transcript/message.js';
import { headLength } from '../../transcript/groups.js';
import type { CompressPlan } from './compress-tier.js';
import type { Candidate } from './plan.js';
import { type Sizes, totalSize } from './sizing.js';

/**
 * Decisions by cost (issue 36): what each soft-zone option costs the server,
 * in seconds at its learned speeds, and which is cheaper. Pure: the speeds
 * come in with the settings ({@link CostSpeeds}), learned from the
 * upstream's answers (upstream/server-speeds.ts); without them the rules by
 * tokens stand.
 *
 * What the server pays for a change to the forwarded history:
 * - a compression re-reads everything after its first changed message, once;
 * - a summary writes its notes (decode, the slow part: ~130 tokens a second
 *   on a 7B model where prefill reads ~5,000), reads its own prompt (suffix
 *   mode: the conversation it shares with the slot is cached, only the
 *   instruction is new) and, once applied, everything kept after the head.
 * Each frees tokens, and the conversation grows into what was freed until
 * the next change: the long-run cost is the growth times the seconds per
 * freed token. So the options are compared by seconds per token freed.
 */

export interface CostSpeeds {
  /** Prompt tokens a second. */
  readonly prefill: number;
  /** Tokens a second written. */
  readonly decode: number;
  /** Tokens a summary writes on this model, when learned. */
  readonly summaryTokens: number | null;
}

/**
 * A summary's own prompt that the slot has not cached (suffix mode): the
 * instruction compactor appends (prompt.ts, some 150 words) and its framing.
 */
export const SUMMARY_INSTRUCTION_TOKENS = 256;

/**
 * The least a compression decided by cost must free, as a share of the
 * budget: below it a compression moves the prefix for a few results and the
 * next one follows a few requests later (the thrash `clear_at_least` was
 * made against, issue 25).
 */
export const MIN_FREED_SHARE = 0.04;

/** An option's cost and what it frees. */
export interface Costed {
  readonly seconds: number;
  readonly freed: number;
}

/** The first index where `changed` holds another message than `messages` (its length when none). */
export function firstChange(messages: readonly ChatMessage[], changed: readonly ChatMessage[]): number {
  const length = Math.min(messages.length, changed.length);
  for (let index = 0; index < length; index++) if (messages[index] !== changed[index]) return index;
  return length;
}

function tokensFrom(sizes: Sizes, from: number): number {
  let sum = 0;
  for (let index = from; index < sizes.perMessage.length; index++) sum += sizes.perMessage[index]!;
  return sum;
}

/**
 * A compression now: the server re-reads everything from its first changed
 * message on, as compressed (the tools stay where they were, in front).
 *
 * @example
 * compressionCost(candidate, sizes, plan, { prefill: 5000, decode: 130, summaryTokens: null })
 * // → { seconds: 0.6, freed: 2100 } for a plan whose first change leaves 3,000 tokens after it
 */
export function compressionCost(candidate: Candidate, sizes: Sizes, plan: CompressPlan, speeds: CostSpeeds): Costed {
  const from = firstChange(candidate.messages, plan.messages);
  const after = tokensFrom(sizes, from) - plan.freed;
  return { seconds: Math.max(0, after) / speeds.prefill, freed: plan.freed };
}

/**
 * A summary prepared now and applied at the crossing (`threshold` tokens
 * then): it writes its notes, reads its instruction, and once applied the
 * server reads the summary pair and everything kept after it (`keptSize`
 * tokens forwarded in all, the head cached).
 */
export function summaryCost(candidate: Candidate, sizes: Sizes, keptSize: number, threshold: number, summaryMaxTokens: number, speeds: CostSpeeds): Costed {
  const head = headLength(candidate.messages);
  const headTokens = totalSize(sizes) - tokensFrom(sizes, head);
  const notes = Math.min(summaryMaxTokens, speeds.summaryTokens ?? summaryMaxTokens);
  const seconds = notes / speeds.decode + SUMMARY_INSTRUCTION_TOKENS / speeds.prefill + Math.max(0, keptSize - headTokens) / speeds.prefill;
  return { seconds, freed: Math.max(0, threshold - keptSize) };
}

/**
 * The compression the crossing can be expected to make instead
 * (compress-ahead.ts `crossingCompression`): at the crossing the history
 * holds `threshold` tokens, and the server re-reads what is left of it from
 * the first change on.
 */
export function crossingCost(sizes: Sizes, crossing: { readonly freed: number; readonly firstChange: number }, threshold: number, speeds: CostSpeeds): Costed {
  const before = totalSize(sizes) - tokensFrom(sizes, crossing.firstChange);
  return { seconds: Math.max(0, threshold - crossing.freed - before) / speeds.prefill, freed: crossing.freed };
}

/**
 * What the newest step added: the tokens from the last assistant message on
 * (its tool calls and their results, or the user's new turn after it). The
 * conversation grows about this much a request, so a compression that frees
 * less is undone by the next one: it moves the prefix and postpones nothing.
 */
export function lastStepTokens(candidate: Candidate, sizes: Sizes): number {
  let from = candidate.messages.length;
  while (from > 0 && candidate.messages[from - 1]!.role !== 'assistant') from--;
  return from === 0 ? 0 : tokensFrom(sizes, from - 1);
}

/** Seconds per token freed; infinite for an option that frees nothing. */
export function perTokenFreed(option: Costed): number {
  return option.freed <= 0 ? Number.POSITIVE_INFINITY : option.seconds / option.freed;
}

/**
 * Whether compressing now is the cheaper way to make room: it frees at
 * least {@link MIN_FREED_SHARE} of the budget and at least what a step adds
 * (`stepTokens`, {@link lastStepTokens}: on a small window a compression
 * freeing less buys not one request, so the way it stood against is still
 * paid in full, a request later), and costs no more per token freed than the
 * other way (the compression the crossing would make, or the summary the
 * soft zone would prepare; none: any compression that frees enough is
 * cheaper than a summary that cannot be made).
 */
export function compressionIsCheaper(compression: Costed, other: Costed | null, budget: number, stepTokens = 0): boolean {
  if (compression.freed < Math.max(MIN_FREED_SHARE * budget, stepTokens)) return false;
  return other === null || perTokenFreed(compression) <= perTokenFreed(other);
}
