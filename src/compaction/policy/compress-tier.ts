import type { Config } from '../../config/schema.js';
import type { ChatMessage } from '../../transcript/message.js';
import { headLength } from '../../transcript/groups.js';
import { compressToolResults, type CompressSettings } from '../../transcript/compress/compress.js';
import { withoutSupersededCarried } from '../../transcript/compress/working-set.js';
import { pruneToolResults } from '../../transcript/prune.js';
import { type Sizes, totalSize } from './sizing.js';

/**
 * The compression tier (DESIGN.md § Compression): before any summary, old
 * tool results are compressed without a model (superseded re-reads and
 * re-runs, identical copies, JSON arrays and logs by structure). Pure: the
 * engine makes an epoch of the plan, so a compression is decided once and
 * replayed byte for byte, like a summary.
 */

/**
 * What a plan of this tier reads of a candidate and the settings: the shapes of plan.ts's
 * `Candidate` and `CompactionSettings`, written here so plan.ts can call the tier without a circle.
 */
interface Compressible {
  readonly messages: readonly ChatMessage[];
}
interface TierSettings {
  readonly compress?: CompressTierSettings | null;
  readonly pruneMaxResultChars: number;
}

export interface CompressTierSettings {
  /** Tokens a compression must free to be applied: each one moves the forwarded prefix, so a small gain is not worth the KV cache it costs. */
  readonly clearAtLeast: number;
  readonly compress: CompressSettings;
}

/** The tier's settings from `compaction.compress`, or null when it is off. */
export function compressSettingsOf(compress: Config['compaction']['compress']): CompressTierSettings | null {
  if (!compress.enabled) return null;
  return {
    clearAtLeast: compress.clear_at_least,
    compress: {
      superseded: compress.superseded,
      identical: compress.identical,
      structure: compress.structure,
      minResultChars: compress.min_result_chars,
      keepItems: compress.keep_items,
      keepLines: compress.keep_lines,
      clear: { keep: compress.clear.keep, excludeTools: compress.clear.exclude_tools },
      readTools: compress.read_tools,
    },
  };
}

/**
 * The most `clear_at_least` asks of a budget: a sixth of it (512 tokens on a 4k
 * window, 1194 on 8k; the default 2048 from a 16k window up). On a 4k window a
 * compression rarely frees 1024 tokens at once (its protected tail is 768), and
 * the re-read loop summarized 29 times in 40 turns with 1024, 20 times with 512
 * (bench/README.md § compress.ts).
 */
const MAX_CLEAR_SHARE = 1 / 6;

/** The tier's settings for a budget: `clear_at_least` at most a sixth of it. */
export function compressForBudget(tier: CompressTierSettings | null | undefined, budget: number | null): CompressTierSettings | null {
  if (tier === undefined || tier === null) return null;
  if (budget === null || tier.clearAtLeast <= budget * MAX_CLEAR_SHARE) return tier;
  return { ...tier, clearAtLeast: Math.floor(budget * MAX_CLEAR_SHARE) };
}

/** What a compression forwards: the candidate with its old results compressed (and pruned) up to `cut`, every message in place. */
export interface CompressPlan {
  readonly tier: 'compress';
  readonly cut: number;
  readonly messages: ChatMessage[];
  /** Tool results compressed or pruned. */
  readonly results: number;
  /** The candidate's size once compressed. */
  readonly size: number;
  /** Tokens it frees. */
  readonly freed: number;
}

/**
 * Compresses the tool results older than the protected tail (`cut`: what a
 * summary would keep raw, `chooseCut`), pruning what is still over
 * `prune.max_result_chars` unless `prune` is false, never a result of `keep` (the working set); with `trusted` (the genuine
 * marks), a file carried after earlier notes is taken out when a newer read of it stays raw. Null when the tier is off, there is no old part (no cut), nothing to compress,
 * or it frees fewer than `clear_at_least` tokens (or `atLeast`, when given).
 */
export function planCompress(
  candidate: Compressible,
  sizes: Sizes,
  cut: number | null,
  settings: TierSettings,
  sizeOf: (message: ChatMessage) => number,
  { prune = true, atLeast, keep, trusted }: { prune?: boolean; atLeast?: number; keep?: ReadonlySet<number>; trusted?: ReadonlySet<number> } = {},
): CompressPlan | null {
  const tier = settings.compress;
  if (tier === undefined || tier === null || cut === null) return null;
  const { messages } = candidate;
  const head = headLength(messages);
  const inPlace = compressToolResults(messages, { from: head, to: cut, settings: tier.compress, holderMaxChars: settings.pruneMaxResultChars, ...(keep === undefined ? {} : { keep }) }).messages;
  // Files carried after earlier notes (`trusted`: the genuine marks) whose newer read stays raw are taken out of their block, as a superseded result is.
  const keepsRaw = (index: number): boolean => index >= cut || keep?.has(index) === true;
  const compressed = trusted === undefined || !tier.compress.superseded ? inPlace : withoutSupersededCarried(inPlace, { from: head, to: cut, trusted, keepsRaw, ...(tier.compress.readTools === undefined ? {} : { readTools: tier.compress.readTools }) });
  // Pruning alone is the prune tier's (taken when it meets the target), not a compression.
  if (compressed === messages) return null;
  const pruned = prune ? pruneToolResults(compressed, settings.pruneMaxResultChars, { from: head, to: cut, shouldPrune: (_, index) => keep?.has(index) !== true }) : compressed;
  if (pruned === messages) return null;
  const total = totalSize(sizes);
  const { size, changed: results } = resized(messages, pruned, sizes, total, { from: head, to: cut }, sizeOf);
  if (total - size < (atLeast ?? tier.clearAtLeast)) return null;
  return { tier: 'compress', cut, messages: [...pruned], results, size, freed: total - size };
}

/**
 * The size of a history of `total` tokens once `changed` stands for
 * `messages` in `[from, to)` (only the messages that are new objects are
 * measured again), and how many changed. Shared by the prune and compress tiers.
 */
export function resized(
  messages: readonly ChatMessage[],
  changed: readonly ChatMessage[],
  sizes: Sizes,
  total: number,
  { from, to }: { from: number; to: number },
  sizeOf: (message: ChatMessage) => number,
): { size: number; changed: number } {
  let size = total;
  let count = 0;
  for (let index = from; index < to; index++) {
    if (changed[index] === messages[index]) continue;
    size += sizeOf(changed[index]!) - sizes.perMessage[index]!;
    count++;
  }
  return { size, changed: count };
}
