import type { Epoch, EpochLookup } from '../types.js';

/**
 * A truncation is a stand-in, never ground to build on (DESIGN.md § The
 * request path, 6.4): the client still sends its whole history, so the epoch
 * that replaces a truncation is written from the original messages it
 * dropped. An epoch *derived from a truncation* is the truncation itself or
 * one made on top of it while the summary could not be tried (a prune, a
 * second truncation): each carries an `expiresAt`, which no summary epoch does.
 *
 * The truncations need no clearing once replaced: an epoch is keyed by the
 * whole history its text was written from, and the one written from the
 * originals saw a longer history than every truncation beneath it, so the
 * lookup (longest prefix first) finds it first.
 */

/** Whether `epoch` stands on a truncation notice (and so must not be summarized on top of). */
export function derivesFromTruncation(epoch: Epoch | null): boolean {
  return epoch !== null && epoch.expiresAt !== undefined;
}

/**
 * The epoch in use beneath the truncations of this history: the longest one
 * not derived from a truncation that was written from less than `epoch` saw,
 * or null when the original messages from the head on are the ground.
 */
export async function epochBeneath(lookup: (hashes: readonly string[]) => Promise<EpochLookup>, hashes: readonly string[], epoch: Epoch): Promise<Epoch | null> {
  let below: Epoch | null = epoch;
  // Each step looks at shorter prefixes only (seenLength falls), so the walk ends.
  while (below !== null && derivesFromTruncation(below)) below = (await lookup(hashes.slice(0, below.seenLength))).inUse;
  return below;
}
