import { carriesIdSlot, withIdSlot } from '../../slots/id-slot.js';
import { conversationKey } from '../../slots/conversation-key.js';
import { tenantOfRequest } from '../edge/tenant.js';
import { BYTES_PER_TOKEN } from '../../transcript/tokens.js';
import type { SlotLease } from '../../slots/scheduler.js';
import type { SlotRouter } from '../../slots/slot-router.js';
import type { AnswerWriter } from './answer.js';
import type { Planned } from './ask-planner.js';
import type { ChatRequestBody } from '../../formats/registry.js';
import type { ReadAhead } from './relay.js';

/**
 * A chat completion sent to its conversation's home slot (src/slots/): the
 * slot queue's turn taken, `id_slot` put into the bytes to forward. The
 * lease is the exchange's until its answer ended (exchange.ts releases it).
 * Left alone: a request that names its own slot, a wire format whose
 * server route is not known to read `id_slot` (WireFormat.pinsSlots), a
 * server without slots.
 */
export function pinToSlot(answer: AnswerWriter, planned: Planned, slots = answer.route.options.slots): Promise<{ readonly bytes: Buffer; readonly lease: SlotLease } | null> | null {
  if (slots === undefined || !slots.enabled || !answer.route.format.pinsSlots || carriesIdSlot(planned.body)) return null;
  // A server known to have no slots to schedule: null at once, not as a promise (issue 40).
  if (slots.unscheduled(planned.context.body.model)) return null;
  return pinned(answer, planned, slots);
}

async function pinned(answer: AnswerWriter, planned: Planned, slots: SlotRouter): Promise<{ readonly bytes: Buffer; readonly lease: SlotLease } | null> {
  const { body } = planned.context;
  // The tenant the epochs are keyed by: a conversation's summaries then run on its own home slot.
  // The chain of the request's read (its print) holds the link already.
  const key = conversationKeyOf(answer, planned);
  // Its size, what reading it anew in another slot costs: the bound of its wait (from the bytes: no walk of the history).
  const tokens = Math.floor(planned.bytes.length / BYTES_PER_TOKEN);
  // The messages forwarded, what the slot holds once it ran: a summary of the conversation waiting meanwhile is sent over them.
  const history = (planned.body as ChatRequestBody).messages;
  const lease = await slots.acquire(body.model, { kind: 'turn', key, tokens, history }, answer.abort);
  if (lease === null) return null;
  answer.record.slot = lease.slot;
  answer.record.slotWaitMs = lease.waitedMs;
  return { bytes: withIdSlot(planned.bytes, lease.slot), lease };
}

/** The conversation a request belongs to, keyed by the tenant the epochs are keyed by: its summaries then run on its own home slot and server. */
export function conversationKeyOf(answer: AnswerWriter, planned: Planned): string {
  const { body } = planned.context;
  return conversationKey({ tenant: tenantOfRequest({ keyTenant: answer.record.keyTenant, headers: answer.request.headers }), model: body.model }, body.messages, answer.record.chat?.print.hashes);
}

/**
 * How much of an answer on a slot may wait for a slow client (relay.ts): the
 * answer is taken in ahead of the client, so the slot's lease ends when the
 * upstream's answer does (issue 33 item 1). 8 MiB holds a 32k-token answer
 * streamed as llama-server's per-token events (~250 bytes each); past it the
 * upstream waits, and a client that reads nothing is cut after idle_ms.
 */
export const SLOT_READ_AHEAD: ReadAhead = { maxBytes: 8 * 1024 * 1024 };

/** The slot an exchange holds, if any: released when its answer ended, and before it is planned again. */
export class SlotHold {
  #lease: SlotLease | null = null;

  get held(): boolean {
    return this.#lease !== null;
  }

  set(lease: SlotLease | null): void {
    this.#lease?.release();
    this.#lease = lease;
  }

  release(): void {
    this.#lease?.release();
  }
}
