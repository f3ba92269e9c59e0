import { carriesIdSlot, withIdSlot } from '../../slots/id-slot.js';
import { conversationKey } from '../../slots/conversation-key.js';
import type { SlotLease } from '../../slots/scheduler.js';
import type { AnswerWriter } from './answer.js';
import type { Planned } from './plan.js';

/**
 * A chat completion sent to its conversation's home slot (src/slots/): the
 * slot queue's turn taken, `id_slot` put into the bytes to forward. The
 * lease is the exchange's until its answer ended (exchange.ts releases it).
 * Left alone: a request that names its own slot, a wire format whose
 * server route is not known to read `id_slot` (WireFormat.pinsSlots), a
 * server without slots.
 */
export async function pinToSlot(answer: AnswerWriter, planned: Planned): Promise<{ readonly bytes: Buffer; readonly lease: SlotLease } | null> {
  const slots = answer.route.options.slots;
  if (slots === undefined || !slots.enabled || !answer.route.format.pinsSlots || carriesIdSlot(planned.body)) return null;
  const { body } = planned.context;
  const key = conversationKey({ tenant: answer.record.tenant, model: body.model }, body.messages);
  const lease = await slots.acquire(body.model, { kind: 'turn', key }, answer.abort.signal);
  if (lease === null) return null;
  answer.record.slot = lease.slot;
  answer.record.slotWaitMs = lease.waitedMs;
  return { bytes: withIdSlot(planned.bytes, lease.slot), lease };
}

/** The slot an exchange holds, if any: released when its answer ended, and before it is planned again. */
export class SlotHold {
  #lease: SlotLease | null = null;

  set(lease: SlotLease | null): void {
    this.#lease?.release();
    this.#lease = lease;
  }

  release(): void {
    this.#lease?.release();
  }
}
