import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import { DROPPED, QueuePlace, Semaphore } from '../../src/compaction/semaphore.js';
import { manualClock } from '../support/manual-clock.js';
import { propertyParameters } from '../transcript/arbitraries.js';

/** Lets pending promise callbacks run. */
const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Work the test finishes by hand, counting how many run at once. */
function tracker() {
  const state = { running: 0, most: 0, started: [] as number[], finish: new Map<number, () => void>() };
  const work = (id: number) => async (): Promise<number> => {
    state.running++;
    state.most = Math.max(state.most, state.running);
    state.started.push(id);
    await new Promise<void>((resolve) => state.finish.set(id, resolve));
    state.running--;
    return id;
  };
  return { state, work };
}

describe('Semaphore', () => {
  it('lets at most `limit` holders run at once, and the others in arrival order', async () => {
    const semaphore = new Semaphore(2);
    const { state, work } = tracker();
    const results = [1, 2, 3, 4, 5].map((id) => semaphore.use(work(id)));
    await tick();
    expect(state.started).toEqual([1, 2]);
    state.finish.get(2)!();
    await tick();
    expect(state.started).toEqual([1, 2, 3]);
    state.finish.get(1)!();
    await tick();
    expect(state.started).toEqual([1, 2, 3, 4]);
    state.finish.get(3)!();
    state.finish.get(4)!();
    await tick();
    state.finish.get(5)!();
    await expect(Promise.all(results)).resolves.toEqual([1, 2, 3, 4, 5]);
    expect(state.most).toBe(2);
  });

  it('releases its place when the work throws, and passes the error on', async () => {
    const semaphore = new Semaphore(1);
    await expect(semaphore.use(async () => Promise.reject(new Error('upstream answered 500')))).rejects.toThrow('upstream answered 500');
    await expect(
      semaphore.use(() => {
        throw new Error('thrown before any promise');
      }),
    ).rejects.toThrow('thrown before any promise');
    // Both places came back: the next two run, one after the other.
    await expect(semaphore.use(async () => 'next')).resolves.toBe('next');
    const { state, work } = tracker();
    const first = semaphore.use(work(1));
    const second = semaphore.use(work(2));
    await tick();
    expect(state.started).toEqual([1]);
    state.finish.get(1)!();
    await tick();
    state.finish.get(2)!();
    await Promise.all([first, second]);
    expect(state.most).toBe(1);
  });

  it('hands a released place to a waiter even when the work failed', async () => {
    const semaphore = new Semaphore(1);
    let fail!: (error: Error) => void;
    const failing = semaphore.use(() => new Promise<never>((_, reject) => (fail = reject)));
    const waiting = semaphore.use(async () => 'waited');
    await tick();
    fail(new Error('boom'));
    await expect(failing).rejects.toThrow('boom');
    await expect(waiting).resolves.toBe('waited');
  });

  it('treats a limit below 1 as 1', async () => {
    const semaphore = new Semaphore(0);
    const { state, work } = tracker();
    const first = semaphore.use(work(1));
    const second = semaphore.use(work(2));
    await tick();
    expect(state.started).toEqual([1]);
    state.finish.get(1)!();
    await tick();
    state.finish.get(2)!();
    await Promise.all([first, second]);
  });

  it('property: never more than `limit` at once, every work runs once, in arrival order', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 4 }),
        fc.array(fc.record({ delay: fc.integer({ min: 0, max: 3 }), fails: fc.boolean() }), { minLength: 1, maxLength: 12 }),
        async (limit, works) => {
          const semaphore = new Semaphore(limit);
          let running = 0;
          let most = 0;
          const started: number[] = [];
          const all = works.map(({ delay, fails }, id) =>
            semaphore.use(async () => {
              running++;
              most = Math.max(most, running);
              started.push(id);
              for (let step = 0; step < delay; step++) await tick();
              running--;
              if (fails) throw new Error(`work ${id} failed`);
              return id;
            }),
          );
          const settled = await Promise.allSettled(all);
          expect(most).toBeLessThanOrEqual(limit);
          // When every work waits at least once, the first `limit` of them overlap: the limit is reached, not just respected.
          if (works.every(({ delay }) => delay > 0)) expect(most).toBe(Math.min(limit, works.length));
          expect(started).toEqual(works.map((_, id) => id));
          settled.forEach((outcome, id) => expect(outcome.status).toBe(works[id]!.fails ? 'rejected' : 'fulfilled'));
        },
      ),
      propertyParameters,
    );
  });

  it('item 8: lets a foreground place go before every background place, and a promoted one before the background ones', async () => {
    const semaphore = new Semaphore(1);
    const { state, work } = tracker();
    const running = semaphore.use(work(0));
    const background = [1, 2, 3].map((id) => ({ id, place: new QueuePlace('background') }));
    const results = background.map(({ id, place }) => semaphore.use(work(id), place));
    results.push(semaphore.use(work(4), new QueuePlace('foreground')));
    background[2]!.place.promote();
    await tick();
    for (const id of [0, 4, 3, 1, 2]) {
      expect(state.started.at(-1)).toBe(id);
      state.finish.get(id)!();
      await tick();
    }
    await Promise.all([running, ...results]);
    expect(state.started).toEqual([0, 4, 3, 1, 2]);
  });

  it('item 8: drops a background place that waited longer than it is useful, never a foreground or promoted one', async () => {
    const clock = manualClock();
    const semaphore = new Semaphore({ limit: 1, now: clock.now, backgroundMaxWaitMs: 1000 });
    const { state, work } = tracker();
    const running = semaphore.use(work(0));
    const stale = semaphore.use(work(1), new QueuePlace('background'));
    const promoted = new QueuePlace('background');
    const kept = semaphore.use(work(2), promoted);
    const foreground = semaphore.use(work(3));
    promoted.promote();
    clock.advance(1001);
    await tick();
    state.finish.get(0)!();
    await tick();
    state.finish.get(3)!();
    await tick();
    state.finish.get(2)!();
    await expect(stale).resolves.toBe(DROPPED);
    await Promise.all([running, kept, foreground]);
    expect(state.started).toEqual([0, 3, 2]);
    expect(semaphore.waiting).toBe(0);
  });
});
