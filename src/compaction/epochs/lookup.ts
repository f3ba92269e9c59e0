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
 * epoch that is not {@link isBeyond} the one in use is stale (a later
 * compaction overtook it): it is dropped, so it cannot stand in the way of
 * the next background epoch.
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
  if (pending !== null && !isBeyond(pending, inUse)) {
    source.delete(pending.key);
    pending = null;
  }
  return { inUse, pending };
}

/**
 * Whether a pending epoch has more to give than the epoch in use: it covers
 * more of the history, or as much but was written from more of it (a summary
 * prepared after the epoch in use was made, whose cut falls inside that
 * epoch's replacement: an epoch that compressed results deep into the kept
 * part covers up to its last one). Else it is stale.
 */
export function isBeyond(pending: Epoch, inUse: Epoch | null): boolean {
  if (inUse === null) return true;
  return pending.sourceLength > inUse.sourceLength || (pending.sourceLength === inUse.sourceLength && pending.seenLength > inUse.seenLength);
}
