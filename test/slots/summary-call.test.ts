import { describe, expect, it } from 'vitest';
import { QueuePlace } from '../../src/compaction/summary-calls/queue-place.js';
import { NotRun, SummaryQueue } from '../../src/compaction/summary-calls/summary-queue.js';
import type { ChatCall, SummarySlot } from '../../src/compaction/ports.js';
import { defaultConfig } from '../../src/config/schema.js';
import { SlotRouter, type SlotUpstream } from '../../src/slots/slot-router.js';
import { slotAwareChat } from '../../src/slots/summary-call.js';

/**
 * Issue 33 item 2: a summary takes its place in the summary queue only once
 * it holds its slot, and a background summary waiting for a slot expires.
 * Before: a summary took its place and then waited for a busy slot, and
 * another tenant's summary waited for that place while its own slot stood
 * free (23.1 s on a real server, 95 ms alone).
 */

/** A llama-server that reports two slots; the slot actions are never asked for (no slot_save). */
const twoSlots: SlotUpstream = {
  getJson: () => Promise.resolve({ total_slots: 2, model_path: '/models/m.gguf' }),
  postJson: () => Promise.reject(new Error('no slot actions here')),
};

function setUp(slotWaitMs: number) {
  const router = new SlotRouter({ upstream: twoSlots, config: { ...defaultConfig().upstream, slots: 'auto', slot_wait_ms: slotWaitMs } });
  const calls: Array<Record<string, unknown>> = [];
  const upstreamCall: ChatCall = (body) => {
    calls.push(body);
    return Promise.resolve({ choices: [{ message: { content: 'notes' } }] });
  };
  const chat = slotAwareChat(upstreamCall, router);
  const queue = new SummaryQueue({ limit: 1, maxQueuedPerTenant: 4, maxQueuedBackground: 4 });
  const summary = (tenant: string, key: string, place: QueuePlace): Promise<unknown> => {
    const slot: SummarySlot = { kind: 'summary', key, place };
    return queue.use(tenant, () => chat({ model: 'm' }, new AbortController().signal, undefined, slot), place);
  };
  return { router, calls, queue, summary };
}

describe('a summary and its slot (issue 33 item 2)', () => {
  it("lets another tenant's summary run on its free slot while one waits for its busy slot", async () => {
    const { router, calls, queue, summary } = setUp(600_000);
    const busy = (await router.acquire('m', { kind: 'turn', key: 'a' }))!;
    (await router.acquire('m', { kind: 'turn', key: 'b' }))!.release();
    const waiting = summary('tenant-a', 'a', new QueuePlace('foreground'));
    // b's summary finds its slot free: it must not wait for the place a's summary would hold while it waits.
    await expect(summary('tenant-b', 'b', new QueuePlace('foreground'))).resolves.toEqual({ choices: [{ message: { content: 'notes' } }] });
    expect(calls.map((body) => body['id_slot'])).toEqual([router.stats()[0]!.stats.slots.find((slot) => slot.owner === 'b')!.slot]);
    expect(router.stats()[0]!.stats.slots[busy.slot]!.queued).toBe(1);
    busy.release();
    await waiting;
    expect(calls).toHaveLength(2);
    expect(queue.waiting).toBe(0);
  });

  it('drops a background summary that waited for its slot longer than upstream.slot_wait_ms: the next crossing decides again', async () => {
    const { router, calls, summary } = setUp(20);
    const busy = (await router.acquire('m', { kind: 'turn', key: 'a' }))!;
    const outcome = await summary('tenant-a', 'a', new QueuePlace('background'));
    expect(outcome).toBeInstanceOf(NotRun);
    expect(calls).toHaveLength(0);
    expect(router.stats()[0]!.stats.slots[busy.slot]!.queued).toBe(0);
    busy.release();
  });
});
