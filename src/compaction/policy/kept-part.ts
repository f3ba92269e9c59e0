import type { ChatMessage } from '../../transcript/message.js';
import { headLength } from '../../transcript/groups.js';
import { pruneToolResults } from '../../transcript/prune.js';
import { compressToolResults } from '../../transcript/compress/compress.js';
import type { CompressTierSettings } from './compress-tier.js';
import type { Sizes } from './sizing.js';

/**
 * What a summary keeps raw, as it will be forwarded: the kept turns' old tool
 * results pruned (those of complete turns), and, when the compression tier is
 * on, compressed: the results older than the protected tail as the tier does,
 * the superseded and repeated ones of the protected tail's complete turns
 * (their newer copy is kept beside them). A crossing that compression alone
 * cannot get under the threshold summarizes; the compressed turns are
 * smaller, so more of them fit in `keep_recent`, and what is kept costs less:
 * one epoch holds both. The summary moves the forwarded prefix anyway, so
 * here a compression needs no `clear_at_least`. Pure.
 */

export interface KeptPart {
  /** The candidate with its kept results compressed and pruned: the candidate's own array when nothing changes. */
  readonly messages: readonly ChatMessage[];
  /** Their sizes (the changed messages measured again). */
  readonly sizes: Sizes;
  /** Indexes of the results the compression changed. */
  readonly compressed: ReadonlySet<number>;
}

/** What a summary's kept results compress to: how many, and their tokens before and after (the report's `compressed N tool results (a -> b tokens)`). */
export interface CompressedKept {
  readonly results: number;
  readonly before: number;
  readonly after: number;
}

/**
 * The kept part for a summary of the candidate: compression in [head, `cut`),
 * lossless compression in [`cut`, `losslessEnd`) (the protected tail's
 * complete turns: `lastTurnStart`, or its complete steps in an agent loop
 * under one user message), pruning in [head, `lastTurnStart`) (never the
 * current turn).
 */
export function keptPartOf(
  messages: readonly ChatMessage[],
  sizes: Sizes,
  { cut, lastTurnStart, losslessEnd = lastTurnStart }: { cut: number; lastTurnStart: number; losslessEnd?: number },
  settings: { readonly pruneMaxResultChars: number; readonly compress?: CompressTierSettings | null; readonly compressKept?: CompressTierSettings | null; readonly keep?: ReadonlySet<number> },
  sizeOf: (message: ChatMessage) => number,
): KeptPart {
  const head = headLength(messages);
  const tier = settings.compressKept === undefined ? settings.compress : settings.compressKept;
  const compressed = tier === undefined || tier === null ? messages : compressedKeptTurns(messages, { head, cut, end: losslessEnd }, tier, settings.pruneMaxResultChars, settings.keep);
  const kept = pruneToolResults(compressed, settings.pruneMaxResultChars, { from: head, to: lastTurnStart, shouldPrune: (_, index) => settings.keep?.has(index) !== true });
  if (kept === messages) return { messages, sizes, compressed: new Set() };
  const changed = new Set<number>();
  for (let index = head; index < Math.max(cut, losslessEnd); index++) if (compressed[index] !== messages[index]) changed.add(index);
  const perMessage = sizes.perMessage.map((size, index) => (kept[index] === messages[index] ? size : sizeOf(kept[index]!)));
  return { messages: kept, sizes: { fixed: sizes.fixed, perMessage }, compressed: changed };
}

/**
 * Before the protected tail, every kind of compression the settings allow;
 * in its complete turns (never the current one), only what loses nothing: a
 * result superseded by a later call, or identical to a later result, whose
 * newer copy is kept too (it comes later). Results the summary goes on to
 * cover are compressed for nothing, and forwarded as its notes.
 */
function compressedKeptTurns(messages: readonly ChatMessage[], { head, cut, end }: { head: number; cut: number; end: number }, tier: CompressTierSettings, holderMaxChars: number, keep: ReadonlySet<number> | undefined): readonly ChatMessage[] {
  const kept = keep === undefined ? {} : { keep };
  const old = compressToolResults(messages, { from: head, to: cut, settings: tier.compress, holderMaxChars, ...kept }).messages;
  const lossless = { ...tier.compress, structure: false, clear: { keep: 0, excludeTools: [] } };
  return end <= cut ? old : compressToolResults(old, { from: cut, to: end, settings: lossless, holderMaxChars, ...kept }).messages;
}

/** The compressed results a summary keeps, in [`from`, `to`), with their sizes before (`sizes`) and after; undefined for none. */
export function compressedKept(part: KeptPart, sizes: Sizes, from: number, to: number): CompressedKept | undefined {
  let results = 0;
  let before = 0;
  let after = 0;
  for (const index of part.compressed) {
    if (index < from || index >= to) continue;
    results++;
    before += sizes.perMessage[index]!;
    after += part.sizes.perMessage[index]!;
  }
  return results === 0 ? undefined : { results, before, after };
}
