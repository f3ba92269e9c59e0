import type { Epoch, EpochStore } from './epoch-store.js';
import { lookupEpochs } from './lookup.js';

/**
 * A truncation is a stand-in, never ground to build on (DESIGN.md § The
 * request path, 6.4): the client still sends its whole history, so the epoch
 * that replaces a truncation is written from the original messages it
 * dropped. An epoch *derived from a truncation* is the truncation itself or
 * one made on top of it while the summary could not be tried (a prune, a
 * second truncation): each carries an `expiresAt`, which no summary epoch does.
 */

/** Whether `epoch` stands on a truncation notice (and so must not be summarized on top of). */
export function derivesFromTruncation(epoch: Epoch | null): boolean {
  return epoch !== null && epoch.expiresAt !== undefined;
}

/**
 * The epoch in use beneath the truncations of this history: the longest one
 * not derived from a truncation that covers less than `epoch`, or null when
 * the original messages from the head on are the ground.
 */
export function epochBeneath(store: EpochStore, hashes: readonly string[], epoch: Epoch): Epoch | null {
  let below: Epoch | null = epoch;
  while (below !== null && derivesFromTruncation(below)) below = lookupEpochs(store, hashes.slice(0, below.sourceLength)).inUse;
  return below;
}

/**
 * Forgets the epochs derived from a truncation that cover more of this history
 * than `sourceLength`: an epoch written from the original messages now stands
 * in their place (the lookup takes the longest prefix, so they would hide it).
 */
export function dropTruncationsBeyond(store: EpochStore, hashes: readonly string[], sourceLength: number): void {
  for (let index = sourceLength + 1; index < hashes.length; index++) {
    const epoch = store.get(hashes[index]!);
    if (epoch !== undefined && epoch.sourceLength === index && derivesFromTruncation(epoch)) store.delete(epoch.key);
  }
}
