import { describe, expect, it, vi } from 'vitest';
import { BACKGROUND_USEFUL_MS, QueuePlace } from '../../src/compaction/summary-calls/queue-place.js';
import { NotRun, SummaryQueue } from '../../src/compaction/summary-calls/summary-queue.js';
import type { ChatCall, SummarySlot } from '../../src/compaction/ports.js';
import { defaultConfig } from '../../src/config/schema.js';
import { SlotRouter, type SlotUpstream } from '../../src/slots/slot-router.js';
import { slotAwareChat } from '../../src/slots/summary-call.js';
import type { ChatMessage } from '../../src/transcript/message.js';

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

  it('drops a background summary that waited for its slot longer than it stays useful (2 minutes, as in the summary queue): the next crossing decides again', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    try {
      const { router, calls, summary } = setUp(20);
      const busy = (await router.acquire('m', { kind: 'turn', key: 'a' }))!;
      const outcome = summary('tenant-a', 'a', new QueuePlace('background'));
      await vi.advanceTimersByTimeAsync(BACKGROUND_USEFUL_MS);
      expect(await outcome).toBeInstanceOf(NotRun);
      expect(calls).toHaveLength(0);
      expect(router.stats()[0]!.stats.slots[busy.slot]!.queued).toBe(0);
      busy.release();
    } finally {
      vi.useRealTimers();
    }
  });

  it('keeps a background summary in its slot queue past upstream.slot_wait_ms: dropped there, the next crossing queued it again behind the same turns, until the crossing waited for all of it (issue 33, 8 on 2)', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    try {
      const { router, calls, summary } = setUp(20);
      const busy = (await router.acquire('m', { kind: 'turn', key: 'a' }))!;
      const outcome = summary('tenant-a', 'a', new QueuePlace('background'));
      // Ten times slot_wait_ms: a turn would have moved long ago; the summary, which has nowhere else to go, stays.
      await vi.advanceTimersByTimeAsync(200);
      expect(router.stats()[0]!.stats.slots[busy.slot]!.queued).toBe(1);
      busy.release();
      expect(await outcome).toEqual({ choices: [{ message: { content: 'notes' } }] });
      expect(calls.map((body) => body['id_slot'])).toEqual([busy.slot]);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('a summary over what its slot holds by the time it runs (issue 33, 8 on 2)', () => {
  it("sends the grown body when a turn of its conversation ran in its slot while it waited, and the body as written when none did", async () => {
    const router = new SlotRouter({ upstream: twoSlots, config: { ...defaultConfig().upstream, slots: 'auto', slot_wait_ms: 600_000 } });
    const calls: Array<Record<string, unknown>> = [];
    const chat = slotAwareChat((body) => (calls.push(body), Promise.resolve({ choices: [{ message: { content: 'notes' } }] })), router);
    const written: ChatMessage[] = [{ role: 'user', content: 'Fix the build.' }];
    const later: ChatMessage[] = [...written, { role: 'assistant', content: 'Done.' }, { role: 'user', content: 'And the tests.' }];
    const grown = (history: readonly ChatMessage[]) => ({ model: 'm', messages: [...history, { role: 'user', content: 'notes, please' }] });
    const asked = { model: 'm', messages: [...written, { role: 'user', content: 'notes, please' }] };
    const first = (await router.acquire('m', { kind: 'turn', key: 'a', history: written }))!;
    const summary = chat(asked, new AbortController().signal, undefined, { kind: 'summary', key: 'a', grown });
    // a's next turn goes before its summary, which then finds that turn's history in the slot.
    const next = router.acquire('m', { kind: 'turn', key: 'a', history: later });
    // Both have asked the scheduler (the router's discovery is a resolved promise) before the slot frees.
    await new Promise((resolve) => setImmediate(resolve));
    expect(router.stats()[0]!.stats.slots[first.slot]!.queued).toBe(2);
    first.release();
    (await next)!.release();
    await summary;
    expect(calls[0]).toEqual({ id_slot: first.slot, ...grown(later) });
    // b's summary runs with no turn of b between: as written.
    (await router.acquire('m', { kind: 'turn', key: 'b', history: written }))!.release();
    await chat({ ...asked, model: 'm' }, new AbortController().signal, undefined, { kind: 'summary', key: 'b', grown });
    expect(calls[1]).toEqual({ id_slot: expect.any(Number), ...asked });
  });
});
