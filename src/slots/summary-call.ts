import type { ChatCall } from '../compaction/ports.js';
import { BACKGROUND_USEFUL_MS } from '../compaction/summary-calls/queue-place.js';
import type { SlotRouter } from './slot-router.js';
import { SlotWaitExpired, type SlotWork } from './scheduler.js';

/**
 * compactor's own summary calls on the upstream's slots: a suffix summary
 * in its conversation's slot queue (so it never meets the conversation's
 * next turn in the slot: they run one after the other), a prepend summary
 * as a guest on a slot nobody calls home. The body is compactor's own, so
 * `id_slot` is simply one more field. A suffix summary that a turn of its
 * conversation went before is sent grown to that turn's history (the
 * slot's, SlotLease.history): as written, it would end where its slot's
 * copy of the conversation ends and the next turn would read again.
 */
export function slotAwareChat(call: ChatCall, slots: SlotRouter): ChatCall {
  return async (body, signal, headers, slot) => {
    const model = typeof body['model'] === 'string' ? body['model'] : '';
    if (slot === undefined || !slots.enabled) return call(body, signal, headers);
    const { place } = slot;
    const where: SlotWork = slot.kind === 'summary' ? { kind: 'summary', key: slot.key } : { kind: 'guest' };
    // The summary's concurrency place is given back while it waits for its slot (issue 33 item 2). Background work
    // waits as long as it stays useful, as in the summary queue: upstream.slot_wait_ms is what a turn's re-read
    // elsewhere costs, and a summary has no elsewhere. Dropped at that bound, the next crossing queued it again,
    // behind the same turns, until the crossing itself waited for a whole summary (8 conversations on 2 slots).
    const work: SlotWork = place === undefined ? where : { ...where, background: () => place.background, backgroundWaitMs: BACKGROUND_USEFUL_MS };
    const lease = await (place === undefined ? slots.acquire(model, work, signal) : place.aside(() => slots.acquire(model, work, signal))).catch((error: unknown) => {
      if (error instanceof SlotWaitExpired) place?.expire();
      throw error;
    });
    if (lease === null) return call(body, signal, headers);
    const grown = slot.kind === 'summary' && lease.history !== undefined ? slot.grown?.(lease.history) : undefined;
    try {
      return await call({ id_slot: lease.slot, ...(grown ?? body) }, signal, headers);
    } finally {
      lease.release();
    }
  };
}
