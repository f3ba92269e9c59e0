import type { SlotLease } from './slot-state.js';

/**
 * A slot leased across replicas (issue 39): each replica's scheduler keeps
 * one request per slot among its own requests, but two replicas in front of
 * one llama-server would each think a slot free. With a shared store, a
 * request that got its slot from its replica's scheduler also takes the
 * slot's lease in the store before it is sent, and gives it back when its
 * answer ends; while another replica holds it, it waits. A store that does
 * not answer lends no lease: each replica then keeps its own slots alone,
 * as without a store.
 */
export interface SlotLeases {
  /** Resolves once `name` (a server, a served model, a slot) is leased to this request, with its release; rejects when `signal` aborts first. */
  take(name: string, signal?: AbortSignal): Promise<() => void>;
}

/** `lease` with the store's lease of its slot taken too: released together, the store's first. */
export async function withSharedLease(lease: SlotLease, name: string, leases: SlotLeases, signal?: AbortSignal): Promise<SlotLease> {
  let release: () => void;
  try {
    release = await leases.take(`${name}:${lease.slot}`, signal);
  } catch (error) {
    lease.release();
    throw error;
  }
  let released = false;
  return {
    slot: lease.slot,
    waitedMs: lease.waitedMs,
    ...(lease.history === undefined ? {} : { history: lease.history }),
    release: () => {
      if (released) return;
      released = true;
      release();
      lease.release();
    },
  };
}
