import type { Epoch, EpochStore } from './epoch-store.js';

/**
 * Finding a history's epochs by its prefix hashes (`hashes[i]` names the
 * first `i` messages). An epoch is keyed by the prefix its text was written
 * from, and counts for a history only when that whole prefix is in it
 * (`seenLength === i`): it then replaces the first `sourceLength` messages.
 */

/**
 * One pass over the prefixes, longest first: the epoch in use of the longest
 * prefix that has one, and the longest pending epoch beyond it (a pending one
 * over a shorter prefix is stale, and not wanted here).
 */
export function lookupEpochs(store: EpochStore, hashes: readonly string[]): { inUse: Epoch | null; pending: Epoch | null } {
  let pending: Epoch | null = null;
  if (store.size === 0) return { inUse: null, pending };
  for (let index = hashes.length - 1; index > 0; index--) {
    const epoch = store.get(hashes[index]!);
    if (epoch === undefined || epoch.seenLength !== index) continue;
    if (epoch.pending !== true) return { inUse: epoch, pending };
    pending ??= epoch;
  }
  return { inUse: null, pending };
}

/**
 * The longest pending epoch that covers more of this history than the epoch
 * in use (which starts the candidate at `sourceStart`). A pending epoch that
 * covers no more is stale (a later compaction overtook it): it is dropped, so
 * it cannot stand in the way of the next background epoch.
 */
export function pendingBeyond(store: EpochStore, hashes: readonly string[], sourceStart: number): Epoch | null {
  if (store.size === 0) return null;
  for (let index = hashes.length - 1; index > 0; index--) {
    const epoch = store.get(hashes[index]!);
    if (epoch === undefined || epoch.seenLength !== index || epoch.pending !== true) continue;
    if (epoch.sourceLength > sourceStart) return epoch;
    store.delete(epoch.key);
  }
  return null;
}
