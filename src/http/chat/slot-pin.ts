import { carriesIdSlot, withIdSlot } from '../../slots/id-slot.js';
import { conversationKey } from '../../slots/conversation-key.js';
import type { SlotLease } from '../../slots/scheduler.js';
import type { ChatExchange } from './exchange.js';
import type { Prepared } from './prepare.js';
import { CHAT_FORMAT } from './wire-format.js';

/**
 * A chat completion sent to its conversation's home slot (src/slots/): the
 * slot queue's turn taken, `id_slot` put into the bytes to forward. The
 * lease is the exchange's until its answer ended (exchange.ts releases it).
 * Left alone: a request that names its own slot, the other wire formats
 * (their llama-server routes are not known to read `id_slot`), a server
 * without slots.
 */
export async function pinToSlot(exchange: ChatExchange, prepared: Prepared): Promise<{ readonly bytes: Buffer; readonly lease: SlotLease } | null> {
  const slots = exchange.route.options.slots;
  if (slots === undefined || !slots.enabled || exchange.route.format !== CHAT_FORMAT || carriesIdSlot(prepared.body)) return null;
  const { body } = prepared.context;
  const key = conversationKey({ tenant: exchange.record.tenant, model: body.model }, body.messages);
  const lease = await slots.acquire(body.model, { kind: 'turn', key }, exchange.abort.signal);
  if (lease === null) return null;
  exchange.record.slot = lease.slot;
  exchange.record.slotWaitMs = lease.waitedMs;
  return { bytes: withIdSlot(prepared.bytes, lease.slot), lease };
}
