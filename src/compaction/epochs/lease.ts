import { setTimeout as sleep } from 'node:timers/promises';
import type { Epoch, EpochLease } from '../types.js';

/**
 * Cross-replica single flight: the epoch of one key is computed by one
 * replica at a time. Within a process the engine's SingleFlight already
 * joins callers; across processes the store's lease (`SET NX PX` with a
 * token on Redis) decides who calls the model. The holder renews it while
 * the summary runs and releases it after; a replica that finds it taken
 * waits for the epoch to appear, and takes over if the lease expires (its
 * holder died) without one.
 */

/**
 * How long a lease lasts without renewal: a holder that died frees the key
 * this long after its last renewal. Renewed every third of it, so two lost
 * renewals in a row (a slow store) do not lose it.
 */
const LEASE_MS = 10_000;

/** How often a waiting replica looks for the epoch: a summary takes seconds, so a quarter second adds little to the wait. */
export const LEASE_POLL_MS = 250;

/** What a lease is taken through: the repository (repository.ts), as one conversation uses it. */
export interface LeaseHolder {
  lease(key: string, ttlMs: number): Promise<EpochLease | null>;
  load(key: string): Promise<Epoch | undefined>;
  save(epoch: Epoch): Promise<void>;
}

export interface LeasedOptions {
  readonly signal: AbortSignal;
  /** Wait for another replica's epoch (a request that needs it); false: give up at once (a background epoch). */
  readonly wait: boolean;
  readonly onProgress?: ((line: string) => void) | undefined;
  readonly leaseMs?: number;
  readonly pollMs?: number;
}

/**
 * Runs `compute` under the lease on `key`; or, while another replica holds
 * it, returns the epoch that replica stores (applied, when it stored it
 * pending), or null without waiting when `wait` is false. An epoch already
 * stored under `key` when the lease is taken is returned as it is: it was
 * written by the replica that held the lease just before.
 */
export async function leased(
  store: LeaseHolder,
  key: string,
  options: LeasedOptions,
  compute: () => Promise<Epoch | null>,
): Promise<Epoch | null> {
  const { signal, wait, onProgress, leaseMs = LEASE_MS, pollMs = LEASE_POLL_MS } = options;
  let told = false;
  for (;;) {
    const lease = await store.lease(key, leaseMs);
    if (lease !== null) {
      const renewal = setInterval(() => void lease.renew(), Math.max(1, Math.floor(leaseMs / 3)));
      try {
        const existing = await store.load(key);
        if (existing !== undefined) return await applied(store, existing, wait);
        return await compute();
      } finally {
        clearInterval(renewal);
        await lease.release();
      }
    }
    if (!wait) return null;
    if (!told) onProgress?.('compacting (waiting for the summary running on another replica)');
    told = true;
    await sleep(pollMs, undefined, { signal });
    const epoch = await store.load(key);
    if (epoch !== undefined) return applied(store, epoch, wait);
  }
}

/** A pending epoch found by a request that needs it is applied (as `apply-pending` does); a background one leaves it pending. */
async function applied(store: LeaseHolder, epoch: Epoch, needed: boolean): Promise<Epoch | null> {
  if (epoch.pending !== true) return epoch;
  if (!needed) return null;
  const inUse: Epoch = { ...epoch, pending: false };
  await store.save(inUse);
  return inUse;
}
