import { describe, expect, it } from 'vitest';
import { type SlotActions, type SlotLease, SlotScheduler, type SlotSchedulerOptions, type SlotWork } from '../../src/slots/scheduler.js';

/** Timers run by hand: the bounded wait is tested by counting, never by sleeping. */
class HandTimers {
  readonly #pending: Array<{ at: number; run: () => void; cancelled: boolean }> = [];
  now = 0;
  after = (ms: number, run: () => void): (() => void) => {
    const timer = { at: this.now + ms, run, cancelled: false };
    this.#pending.push(timer);
    return () => {
      timer.cancelled = true;
    };
  };
  advance(ms: number): void {
    this.now += ms;
    for (const timer of this.#pending.filter((entry) => entry.at <= this.now && !entry.cancelled)) {
      timer.cancelled = true;
      timer.run();
    }
  }
}

class RecordedActions implements SlotActions {
  readonly calls: string[] = [];
  saveBytes = 1000;
  saveFails = false;
  save(slot: number, filename: string): Promise<number | null> {
    this.calls.push(`save ${slot} ${filename}`);
    return Promise.resolve(this.saveFails ? null : this.saveBytes);
  }
  restore(slot: number, filename: string): Promise<boolean> {
    this.calls.push(`restore ${slot} ${filename}`);
    return Promise.resolve(true);
  }
  erase(slot: number): Promise<boolean> {
    this.calls.push(`erase ${slot}`);
    return Promise.resolve(true);
  }
}

function scheduler(overrides: Partial<SlotSchedulerOptions> = {}): { slots: SlotScheduler; timers: HandTimers; actions: RecordedActions } {
  const timers = new HandTimers();
  const actions = new RecordedActions();
  const slots = new SlotScheduler({ slots: 4, waitMs: 1000, save: false, saveMaxBytes: 1e9, actions, timers, ...overrides });
  return { slots, timers, actions };
}

const turn = (key: string) => ({ kind: 'turn', key }) as const;
const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
/** A summary no request waits for while `isBackground` says so, dropped after two minutes in line (as summary-call.ts asks). */
const background = (key: string, isBackground: () => boolean = () => true) => ({ kind: 'summary', key, background: isBackground, backgroundWaitMs: 120_000 }) as const;

/** Two slots: conversation a's summary running in a's home slot, c's turn in the other. */
async function summaryBesideATurn(): Promise<{ slots: SlotScheduler; timers: HandTimers; summary: SlotLease; c: SlotLease }> {
  const { slots, timers } = scheduler({ slots: 2 });
  (await slots.acquire(turn('a'))).release();
  const summary = await slots.acquire({ kind: 'summary', key: 'a' });
  const c = await slots.acquire(turn('c'));
  return { slots, timers, summary, c };
}

/** Requests that keep their slot, each named in `order` with the slot it got, when it got it. */
function slotsTaken(slots: SlotScheduler): { order: string[]; take: (name: string, work: SlotWork) => Promise<SlotLease> } {
  const order: string[] = [];
  const take = (name: string, work: SlotWork): Promise<SlotLease> => slots.acquire(work).then((lease) => (order.push(`${name} ${lease.slot}`), lease));
  return { order, take };
}

/** Requests that end as soon as they have their slot: `order` is the order they got it in, which is what counts. */
function inOrder(slots: SlotScheduler): { order: string[]; run: (name: string, work: SlotWork) => Promise<void> } {
  const order: string[] = [];
  const run = (name: string, work: SlotWork): Promise<void> =>
    slots.acquire(work).then((lease) => {
      order.push(name);
      lease.release();
    });
  return { order, run };
}

describe('SlotScheduler: a home slot per conversation', () => {
  it('gives each of 4 conversations on 4 slots its own slot, the same one every turn', async () => {
    const { slots } = scheduler();
    const first = [];
    for (const key of ['a', 'b', 'c', 'd']) {
      const lease = await slots.acquire(turn(key));
      first.push(lease.slot);
      lease.release();
    }
    expect(new Set(first).size).toBe(4);
    for (const [index, key] of ['a', 'b', 'c', 'd'].entries()) {
      const lease = await slots.acquire(turn(key));
      expect(lease.slot).toBe(first[index]);
      lease.release();
    }
  });

  it('keeps at most one request in flight per slot; the others of that slot go in arrival order', async () => {
    const { slots } = scheduler();
    const order: string[] = [];
    const first = await slots.acquire(turn('a'));
    const waiting = ['a2', 'a3', 'a4'].map((name) => slots.acquire(turn('a')).then((lease) => (order.push(name), lease)));
    await flush();
    expect(order).toEqual([]);
    expect(slots.stats().slots[first.slot]?.queued).toBe(3);
    first.release();
    for (let index = 0; index < 3; index++) (await waiting[index]!).release();
    expect(order).toEqual(['a2', 'a3', 'a4']);
  });

  it('lets a request that waited longer than waitMs take a free slot rather than wait on', async () => {
    const { slots, timers } = scheduler({ slots: 2 });
    const busy = await slots.acquire(turn('a'));
    let moved: number | undefined;
    void slots.acquire(turn('a')).then((lease) => (moved = lease.slot));
    timers.advance(999);
    await flush();
    expect(moved).toBeUndefined();
    timers.advance(1);
    await flush();
    expect(moved).toBe(1 - busy.slot);
    expect(slots.stats().moves).toBe(1);
    // The conversation lives in its new slot now.
    busy.release();
    expect(slots.homeOf('a')).toBe(moved);
  });

  it('with no free slot after waitMs, takes the first slot that frees (its own or another)', async () => {
    const { slots, timers } = scheduler({ slots: 2 });
    const a = await slots.acquire(turn('a'));
    const b = await slots.acquire(turn('b'));
    let got: number | undefined;
    void slots.acquire(turn('a')).then((lease) => (got = lease.slot));
    timers.advance(5000);
    await flush();
    expect(got).toBeUndefined();
    b.release();
    await flush();
    expect(got).toBe(b.slot);
    a.release();
  });

  it('never lets a busy conversation starve another: past waitMs, a waiting request goes before every later one', async () => {
    const { slots, timers } = scheduler({ slots: 1 });
    const first = await slots.acquire(turn('a'));
    const order: string[] = [];
    const b = slots.acquire(turn('b')).then((lease) => (order.push('b'), lease));
    timers.advance(1000);
    // a keeps sending: without the bound its slot queue would always have one more of its own.
    const later = ['a2', 'a3'].map((name) => slots.acquire(turn('a')).then((lease) => (order.push(name), lease)));
    first.release();
    (await b).release();
    for (const next of later) (await next).release();
    expect(order).toEqual(['b', 'a2', 'a3']);
  });

  it('drops a waiting request whose client left, and serves the next', async () => {
    const { slots } = scheduler();
    const first = await slots.acquire(turn('a'));
    const gone = new AbortController();
    const left = slots.acquire(turn('a'), gone.signal);
    const next = slots.acquire(turn('a'));
    gone.abort();
    await expect(left).rejects.toThrow();
    first.release();
    expect((await next).slot).toBe(first.slot);
  });
});

describe('SlotScheduler: more conversations than slots', () => {
  it('gives the slot of the least recently used conversation to the one that asks', async () => {
    const { slots } = scheduler({ slots: 2 });
    for (const key of ['a', 'b', 'a']) (await slots.acquire(turn(key))).release();
    const c = await slots.acquire(turn('c'));
    expect(c.slot).toBe(slots.homeOf('c'));
    expect(slots.homeOf('b')).toBeUndefined();
    expect(slots.homeOf('a')).toBeDefined();
    expect(slots.stats().evictions).toBe(1);
    c.release();
  });

  it('gives a conversation without a slot the first slot that frees, whichever it is (no slot sits idle while it waits)', async () => {
    for (const first of ['a', 'b'] as const) {
      const { slots } = scheduler({ slots: 2 });
      const held = { a: await slots.acquire(turn('a')), b: await slots.acquire(turn('b')) };
      let got: number | undefined;
      void slots.acquire(turn('c')).then((lease) => (got = lease.slot));
      await flush();
      expect(got).toBeUndefined();
      held[first].release();
      await flush();
      expect(got).toBe(held[first].slot);
      expect(slots.homeOf(first)).toBeUndefined();
    }
  });

  it('with slot_save saves the evicted conversation under its prefix hash and restores it when it comes back', async () => {
    const { slots, actions } = scheduler({ slots: 1, save: true });
    (await slots.acquire(turn('a'))).release();
    (await slots.acquire(turn('b'))).release();
    (await slots.acquire(turn('a'))).release();
    expect(actions.calls).toEqual(['save 0 compactor-a.bin', 'save 0 compactor-b.bin', 'restore 0 compactor-a.bin']);
    expect(slots.stats()).toMatchObject({ saves: 2, restores: 1, evictions: 2 });
  });

  it('keeps the files under slot_save_max_bytes, the oldest overwritten with an empty slot first', async () => {
    const { slots, actions } = scheduler({ slots: 1, save: true, saveMaxBytes: 2500 });
    for (const key of ['a', 'b', 'c', 'd']) (await slots.acquire(turn(key))).release();
    // a, b, c saved (1000 bytes each): c made 3000 > 2500, so a's file was emptied (erase the slot, then save it over a's name).
    expect(actions.calls).toEqual(['save 0 compactor-a.bin', 'save 0 compactor-b.bin', 'save 0 compactor-c.bin', 'erase 0', 'save 0 compactor-a.bin']);
    expect(slots.stats().filesBytes).toBe(2000);
    expect(slots.stats().filesErased).toBe(1);
  });

  it('stops saving when the server cannot (no --slot-save-path), and still serves every request', async () => {
    const { slots, actions } = scheduler({ slots: 1, save: true });
    actions.saveFails = true;
    for (const key of ['a', 'b', 'c']) (await slots.acquire(turn(key))).release();
    expect(actions.calls).toEqual(['save 0 compactor-a.bin']);
    expect(slots.stats().saveFailures).toBe(1);
  });
});

describe('SlotScheduler: summaries', () => {
  it("runs a suffix summary on its conversation's slot, and the next turn waits for it", async () => {
    const { slots } = scheduler();
    (await slots.acquire(turn('a'))).release();
    const summary = await slots.acquire({ kind: 'summary', key: 'a' });
    expect(summary.slot).toBe(slots.homeOf('a'));
    let next: number | undefined;
    void slots.acquire(turn('a')).then((lease) => (next = lease.slot));
    await flush();
    expect(next).toBeUndefined();
    summary.release();
    await flush();
    expect(next).toBe(summary.slot);
  });

  it('without slot_save, a turn behind its own summary waits no longer than its bound, then re-reads elsewhere (issue 33 item 4)', async () => {
    const { slots, timers } = scheduler({ slots: 2 });
    (await slots.acquire(turn('a'))).release();
    const summary = await slots.acquire({ kind: 'summary', key: 'a' });
    let next: number | undefined;
    void slots.acquire(turn('a')).then((lease) => (next = lease.slot));
    timers.advance(999);
    await flush();
    expect(next).toBeUndefined();
    timers.advance(1);
    await flush();
    expect(next).not.toBe(summary.slot);
    expect(next).toEqual(expect.any(Number));
    expect(slots.stats().moves).toBe(1);
  });

  it("bounds a turn's wait for its home slot by what re-reading its prompt would cost at the server's reported prefill speed (issue 33 item 4)", async () => {
    // The server speeds learned from llama-server's timings say 2,000 tokens a second: a 400-token prompt re-reads in 200 ms.
    const { slots, timers } = scheduler({ slots: 2, waitMs: 60_000, msToRead: (tokens) => tokens / 2 });
    const running = await slots.acquire(turn('a'));
    let next: number | undefined;
    void slots.acquire({ kind: 'turn', key: 'a', tokens: 400 }).then((lease) => (next = lease.slot));
    timers.advance(199);
    await flush();
    expect(next).toBeUndefined();
    timers.advance(1);
    await flush();
    expect(next).toBeDefined();
    expect(next).not.toBe(running.slot);
    running.release();
  });

  it('past its bound, a turn behind its own summary takes only a slot nobody else waits for: it never re-reads in a slot another conversation is queued for (issue 33, 8 on 4)', async () => {
    const { slots, timers, summary, c } = await summaryBesideATurn();
    const { order, take } = slotsTaken(slots);
    const next = take('a', turn('a'));
    timers.advance(1000);
    // d has no home and came after a's turn; a's turn is past its bound.
    const d = take('d', turn('d'));
    c.release();
    await flush();
    // Re-reading a's history there would keep d waiting as long: d gets the slot, a's turn waits for its summary.
    expect(order).toEqual([`d ${c.slot}`]);
    summary.release();
    await flush();
    expect(order).toEqual([`d ${c.slot}`, `a ${summary.slot}`]);
    expect(slots.stats().moves).toBe(0);
    (await d).release();
    (await next).release();
  });

  it('past its bound, a turn behind its own summary still takes a slot that frees with nobody waiting for it', async () => {
    const { slots, timers, summary, c } = await summaryBesideATurn();
    let next: number | undefined;
    void slots.acquire(turn('a')).then((lease) => (next = lease.slot));
    timers.advance(1000);
    c.release();
    await flush();
    expect(next).toBe(c.slot);
    summary.release();
  });

  it("a turn whose conversation's summary has not started goes first, and the summary runs after it in the turn's slot, never beside it", async () => {
    const { slots } = scheduler({ slots: 2 });
    const a = await slots.acquire(turn('a'));
    const b = await slots.acquire(turn('b'));
    // x has no home: its summary waits for the first slot that frees; x's next turn takes its place in line.
    let summarySlot: number | undefined;
    const summary = slots.acquire({ kind: 'summary', key: 'x' }).then((lease) => ((summarySlot = lease.slot), lease));
    const next = slots.acquire(turn('x'));
    a.release();
    const running = await next;
    expect(running.slot).toBe(a.slot);
    // The other slot frees while x's turn runs: the summary does not start there (it would re-read x beside its turn).
    b.release();
    await flush();
    expect(summarySlot).toBeUndefined();
    running.release();
    (await summary).release();
    expect(summarySlot).toBe(running.slot);
  });

  it('a turn that goes before its waiting summary puts the summary right behind it, not at the end: an active conversation never pushes its summary back until its crossing (issue 33, 8 on 2)', async () => {
    const { slots, timers } = scheduler({ slots: 1 });
    const a = await slots.acquire(turn('a'));
    const { order, run } = inOrder(slots);
    const summary = run('summary', { kind: 'summary', key: 'a' });
    // b came after the summary and waited past its bound: it goes before everyone who came after it, not before the summary.
    const b = run('b', turn('b'));
    timers.advance(1000);
    const next = run('a', turn('a'));
    a.release();
    await Promise.all([summary, b, next]);
    expect(order).toEqual(['a', 'summary', 'b']);
  });

  it("gives a summary the history its conversation's latest turn started with while it waited: by then its slot holds that one, not the summary's own", async () => {
    const { slots } = scheduler({ slots: 1, backgroundInLine: 1 });
    const first = [{ role: 'user', content: 'Fix the build.' }] as const;
    const later = [...first, { role: 'assistant', content: 'Done.' }, { role: 'user', content: 'And the tests.' }] as const;
    const x = await slots.acquire(turn('x'));
    // a's summary is held (x's holds the one place) and then waits in line; a's turns go before it.
    const held = slots.acquire(background('x'));
    const summary = slots.acquire(background('a'));
    const a1 = slots.acquire({ kind: 'turn', key: 'a', history: first });
    x.release();
    (await held).release();
    const running = await a1;
    const a2 = slots.acquire({ kind: 'turn', key: 'a', history: later });
    running.release();
    (await a2).release();
    const lease = await summary;
    expect(lease.history).toBe(later);
    lease.release();
    // A summary no turn of its conversation started beside has nothing newer to extend to.
    const alone = await slots.acquire(background('b'));
    expect(alone.history).toBeUndefined();
    alone.release();
  });

  it('lets at most backgroundInLine background summaries hold a place in line: the next takes its place when one ends, behind the turns sent meanwhile (issue 33, 8 on 2)', async () => {
    const { slots } = scheduler({ slots: 1, backgroundInLine: 1 });
    const x = await slots.acquire(turn('x'));
    const { order, run } = inOrder(slots);
    const b = run('summary b', background('b'));
    const c = run('summary c', background('c'));
    await flush();
    // c waits for a place, and says so where waiting requests show.
    expect(slots.stats().waitingForAny).toBe(2);
    const d = run('d', turn('d'));
    x.release();
    await Promise.all([b, c, d]);
    expect(order).toEqual(['summary b', 'd', 'summary c']);
  });

  it('starts a background summary past that bound at once when its slot stands free with nobody waiting for it (issue 33 item 2)', async () => {
    const { slots } = scheduler({ slots: 2, backgroundInLine: 1 });
    const b = await slots.acquire(background('b'));
    const c = await slots.acquire(background('c'));
    expect(c.slot).toBe(1 - b.slot);
  });

  it('gives a held summary its place at once when a request has come to wait for it, before the requests after that', async () => {
    const { slots } = scheduler({ slots: 1, backgroundInLine: 1 });
    const b = await slots.acquire(background('b'));
    let waitedFor = false;
    const { order, run } = inOrder(slots);
    const c = run('summary c', background('c', () => !waitedFor));
    await flush();
    waitedFor = true;
    const d = run('d', turn('d'));
    b.release();
    await Promise.all([c, d]);
    expect(order).toEqual(['summary c', 'd']);
  });

  it("drops a held background summary at its bound, counted from when it asked, and the next takes the place", async () => {
    const { slots, timers } = scheduler({ slots: 1, backgroundInLine: 1 });
    const x = await slots.acquire(turn('x'));
    const b = slots.acquire(background('b'));
    const c = slots.acquire(background('c'));
    const dropped = c.then(
      () => 'granted',
      (error: unknown) => (error as Error).name,
    );
    timers.advance(120_000);
    expect(await dropped).toBe('SlotWaitExpired');
    expect(slots.stats().waitingForAny).toBe(0);
    x.release();
    await b.then(() => undefined, () => undefined);
  });

  it('gives the slot to the turn that waited for its summary before the requests that have not waited their bound', async () => {
    const { slots, summary, c } = await summaryBesideATurn();
    const order: string[] = [];
    // d has no home and came first, but has not waited its bound.
    const d = slots.acquire(turn('d')).then((lease) => (order.push('d'), lease));
    const next = slots.acquire(turn('a')).then((lease) => (order.push(`a ${lease.slot}`), lease));
    summary.release();
    await flush();
    expect(order).toEqual([`a ${summary.slot}`]);
    c.release();
    (await d).release();
    (await next).release();
  });

  it('never lets a turn that waited for its summary go before a request that came before it and waited past its bound (issue 33, 8 on 2: every such turn went first, p99 +17% on off)', async () => {
    const { slots, timers, summary, c } = await summaryBesideATurn();
    // d has no home and waits past waitMs: it takes the first slot that frees, before a's turn sent after it.
    const { order, take } = slotsTaken(slots);
    const d = take('d', turn('d'));
    timers.advance(1000);
    const next = take('a', turn('a'));
    summary.release();
    await flush();
    expect(order).toEqual([`d ${summary.slot}`]);
    (await d).release();
    await flush();
    // a's turn then runs where its summary left its history, not in c's slot.
    expect(order).toEqual([`d ${summary.slot}`, `a ${summary.slot}`]);
    c.release();
    (await next).release();
  });

  it('with slot_save saves the slot before the summary, and a turn that moves away restores it', async () => {
    const { slots, actions, timers } = scheduler({ slots: 2, save: true });
    (await slots.acquire(turn('a'))).release();
    const summary = await slots.acquire({ kind: 'summary', key: 'a' });
    expect(actions.calls).toEqual([`save ${summary.slot} compactor-a.bin`]);
    const moved = slots.acquire(turn('a'));
    timers.advance(1000);
    const lease = await moved;
    expect(lease.slot).toBe(1 - summary.slot);
    expect(actions.calls.at(-1)).toBe(`restore ${lease.slot} compactor-a.bin`);
  });

  it("never puts a prepend summary on a conversation's slot while one is free; else evicts the least recently used", async () => {
    const { slots } = scheduler({ slots: 2 });
    (await slots.acquire(turn('a'))).release();
    const guest = await slots.acquire({ kind: 'guest' });
    expect(guest.slot).not.toBe(slots.homeOf('a'));
    guest.release();
    (await slots.acquire(turn('b'))).release();
    (await slots.acquire(turn('a'))).release();
    const second = await slots.acquire({ kind: 'guest' });
    expect(slots.homeOf('b')).toBeUndefined();
    expect(second.slot).not.toBe(slots.homeOf('a'));
    second.release();
  });
});
