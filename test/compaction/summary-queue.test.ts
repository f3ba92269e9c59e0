import { describe, expect, it } from 'vitest';
import { BACKGROUND_LIMIT, SummaryQueue, NotRun, PER_TENANT_LIMIT, STALE_LIMIT } from '../../src/compaction/summary-calls/summary-queue.js';
import { QueuePlace } from '../../src/compaction/summary-calls/queue-place.js';
import { manualClock } from '../support/manual-clock.js';

/** SummaryQueue' order and bounds, one summary at a time, work that finishes when the test says (issue 21 items 3 and 5). */

function gate() {
  const opened: Array<() => void> = [];
  return {
    work: (name: string, log: string[]) => () => new Promise<string>((resolve) => opened.push(() => { log.push(name); resolve(name); })),
    openNext: async () => {
      opened.shift()?.();
      await new Promise((resolve) => setTimeout(resolve, 0));
    },
  };
}

describe('SummaryQueue', () => {
  it('serves the tenant served least recently, requests waiting before background summaries', async () => {
    const drops: string[] = [];
    const slots = new SummaryQueue({ limit: 1, maxQueuedPerTenant: 10, maxQueuedBackground: 10, onDrop: (limit) => drops.push(limit) });
    const { work, openNext } = gate();
    const log: string[] = [];
    const all = [
      slots.use('A', work('A1', log)),
      slots.use('A', work('A2', log)),
      slots.use('A', work('A3', log)),
      slots.use('B', work('B-background', log), new QueuePlace('background')),
      slots.use('B', work('B1', log)),
      slots.use('C', work('C1', log)),
    ];
    await new Promise((resolve) => setTimeout(resolve, 0)); // the first work starts on the next microtask
    for (let step = 0; step < 6; step++) await openNext();
    await Promise.all(all);
    expect(log).toEqual(['A1', 'B1', 'C1', 'A2', 'A3', 'B-background']);
    expect(drops).toEqual([]);
  });

  it("past a tenant's limit its stalest background summary is dropped for a request, and a background one is refused", async () => {
    const drops: string[] = [];
    const slots = new SummaryQueue({ limit: 1, maxQueuedPerTenant: 2, maxQueuedBackground: 10, onDrop: (limit) => drops.push(limit) });
    const { work, openNext } = gate();
    const log: string[] = [];
    const running = slots.use('A', work('A-running', log));
    const stalest = slots.use('A', work('A-bg1', log), new QueuePlace('background'));
    const newer = slots.use('A', work('A-bg2', log), new QueuePlace('background'));
    const request = slots.use('A', work('A-request', log));
    await new Promise((resolve) => setTimeout(resolve, 0));
    const refused = await slots.use('A', work('A-bg3', log), new QueuePlace('background'));
    expect(refused).toEqual(new NotRun(PER_TENANT_LIMIT));
    expect(await stalest).toEqual(new NotRun(PER_TENANT_LIMIT));
    for (let step = 0; step < 3; step++) await openNext();
    expect(await Promise.all([running, request, newer])).toEqual(['A-running', 'A-request', 'A-bg2']);
    expect(drops).toEqual([PER_TENANT_LIMIT, PER_TENANT_LIMIT]);
  });

  it('past the background bound the stalest background summary of any tenant is dropped', async () => {
    const slots = new SummaryQueue({ limit: 1, maxQueuedPerTenant: 10, maxQueuedBackground: 2 });
    const { work, openNext } = gate();
    const log: string[] = [];
    const running = slots.use('A', work('running', log));
    const first = slots.use('A', work('A-bg', log), new QueuePlace('background'));
    const second = slots.use('B', work('B-bg', log), new QueuePlace('background'));
    const third = slots.use('C', work('C-bg', log), new QueuePlace('background'));
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(await first).toEqual(new NotRun(BACKGROUND_LIMIT));
    expect(slots.waiting).toBe(2);
    for (let step = 0; step < 3; step++) await openNext();
    expect(await Promise.all([running, second, third])).toEqual(['running', 'B-bg', 'C-bg']);
  });

  it('a promoted background summary goes before the background ones; a background one that waited too long is dropped, a promoted one never', async () => {
    const clock = manualClock();
    const drops: string[] = [];
    const slots = new SummaryQueue({ limit: 1, maxQueuedPerTenant: 10, maxQueuedBackground: 10, backgroundMaxWaitMs: 1000, now: clock.now, onDrop: (limit) => drops.push(limit) });
    const { work, openNext } = gate();
    const log: string[] = [];
    const running = slots.use('A', work('running', log));
    const stale = slots.use('A', work('A-stale', log), new QueuePlace('background'));
    const promoted = new QueuePlace('background');
    const kept = slots.use('A', work('A-promoted', log), promoted);
    const later = slots.use('A', work('A-later', log), new QueuePlace('background'));
    promoted.promote();
    clock.advance(1001);
    await new Promise((resolve) => setTimeout(resolve, 0));
    await openNext();
    expect(log).toEqual(['running']);
    await openNext();
    expect(log).toEqual(['running', 'A-promoted']);
    expect(await stale).toEqual(new NotRun(STALE_LIMIT));
    expect(await later).toEqual(new NotRun(STALE_LIMIT));
    await Promise.all([running, kept]);
    expect(drops).toEqual([STALE_LIMIT, STALE_LIMIT]);
    expect(slots.waiting).toBe(0);
  });

  it('gives its place back when the work throws, and passes the error on', async () => {
    const slots = new SummaryQueue({ limit: 1, maxQueuedPerTenant: 10, maxQueuedBackground: 10 });
    let fail!: (error: Error) => void;
    const failing = slots.use('A', () => new Promise<never>((_, reject) => (fail = reject)));
    const waiting = slots.use('B', async () => 'waited');
    await new Promise((resolve) => setTimeout(resolve, 0));
    fail(new Error('upstream answered 500'));
    await expect(failing).rejects.toThrow('upstream answered 500');
    await expect(waiting).resolves.toBe('waited');
    await expect(slots.use('A', () => { throw new Error('thrown before any promise'); })).rejects.toThrow('thrown before any promise');
    await expect(slots.use('A', async () => 'next')).resolves.toBe('next');
  });
});
