import type { Epoch, EpochLookup } from '../types.js';

/**
 * Finding a history's epochs by its prefix hashes (`hashes[i]` names the
 * first `i` messages): the rules, written once. An epoch is keyed by the
 * prefix its text was written from, and counts for a history only when that
 * whole prefix is in it (`seenLength === i`, its key `hashes[i]`): it then
 * replaces the first `sourceLength` messages.
 *
 * A store only finds values, longest prefix first: the memory store reads
 * each prefix, the Redis script sends what it found down to the first value
 * in use (epochs/redis-store.ts). Both hand them to {@link EpochChoice}, so the
 * choice is the same whichever store made it (test/compaction/epochs/lookup-table.test.ts).
 */

/**
 * One pass over the prefixes, longest first: the epoch in use of the longest
 * prefix that has one, and the longest pending epoch beyond it. A pending
 * epoch that is not {@link isBeyond} the one in use is stale (a later
 * compaction overtook it): `onStale` is told, so the store can drop it and it
 * cannot stand in the way of the next background epoch.
 */
export class EpochChoice {
  #inUse: Epoch | null = null;
  #pending: Epoch | null = null;
  readonly #hashes: readonly string[];
  readonly #onStale: ((epoch: Epoch) => void) | undefined;

  constructor(hashes: readonly string[], onStale?: (epoch: Epoch) => void) {
    this.#hashes = hashes;
    this.#onStale = onStale;
  }

  /** Whether an epoch in use was chosen: no shorter prefix can change the choice. */
  get done(): boolean {
    return this.#inUse !== null;
  }

  /**
   * The value found under `hashes[at]`, offered longest prefix first;
   * undefined when what the store holds there is not an epoch (a damaged or
   * tampered value: a miss). Whether it counted for this history.
   */
  offer(at: number, epoch: Epoch | undefined): boolean {
    if (epoch === undefined || epoch.seenLength !== at || epoch.key !== this.#hashes[at]) return false;
    if (epoch.pending !== true) this.#inUse ??= epoch;
    else if (this.#inUse === null) this.#pending ??= epoch;
    else this.#onStale?.(epoch);
    return true;
  }

  /** The choice made from what was offered. */
  result(): EpochLookup {
    let pending = this.#pending;
    if (pending !== null && !isBeyond(pending, this.#inUse)) {
      this.#onStale?.(pending);
      pending = null;
    }
    return { inUse: this.#inUse, pending };
  }
}

/** Epochs read synchronously, by prefix hash: the memory store. */
export type EpochAt = (key: string) => Epoch | undefined;

/**
 * The lookup over a store that reads each prefix at once (memory): every
 * prefix, longest first; those past the epoch in use too, so the stale
 * pending epochs beneath it are told to `onStale`.
 */
export function lookupEpochs(get: EpochAt, hashes: readonly string[], onStale?: (epoch: Epoch) => void): EpochLookup {
  const choice = new EpochChoice(hashes, onStale);
  for (let index = hashes.length - 1; index > 0; index--) {
    const epoch = get(hashes[index]!);
    if (epoch !== undefined) choice.offer(index, epoch);
  }
  return choice.result();
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
