import type { Epoch, EpochLookup } from '../types.js';

/**
 * Finding a history's epochs by its prefix hashes (`hashes[i]` names the
 * first `i` messages). An epoch is keyed by the prefix its text was written
 * from, and counts for a history only when that whole prefix is in it
 * (`seenLength === i`): it then replaces the first `sourceLength` messages.
 */

/** Epochs read synchronously: the memory store. */
export interface EpochSource {
  get(key: string): Epoch | undefined;
  delete(key: string): void;
  readonly size: number;
}

/**
 * One pass over the prefixes, longest first: the epoch in use of the longest
 * prefix that has one, and the longest pending epoch beyond it. A pending
 * epoch that covers no more than the one in use is stale (a later compaction
 * overtook it): it is dropped, so it cannot stand in the way of the next
 * background epoch.
 */
export function lookupEpochs(source: EpochSource, hashes: readonly string[]): EpochLookup {
  let pending: Epoch | null = null;
  let inUse: Epoch | null = null;
  if (source.size === 0) return { inUse, pending };
  for (let index = hashes.length - 1; index > 0; index--) {
    const epoch = source.get(hashes[index]!);
    if (epoch === undefined || epoch.seenLength !== index) continue;
    if (epoch.pending !== true) inUse ??= epoch;
    else if (inUse === null) pending ??= epoch;
    else source.delete(epoch.key);
  }
  if (pending !== null && inUse !== null && pending.sourceLength <= inUse.sourceLength) {
    source.delete(pending.key);
    pending = null;
  }
  return { inUse, pending };
}
