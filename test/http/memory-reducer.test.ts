import { afterEach, describe, expect, it, vi } from 'vitest';
import { getHeapSpaceStatistics } from 'node:v8';
import { GROWTH_BYTES, INITIAL_REDUCER_STATE, QUIET_TICKS, fullCollector, reducerTick, startMemoryReducer } from '../../src/http/ops/memory-reducer.js';

/**
 * The memory reducer (issue 26: RSS with 1,000 idle streams ≤ 150 MB, also
 * after a load burst): one full collection once requests stop after the heap
 * grew, never while they keep coming. Collections are counted over ticks,
 * never timed.
 */

const MiB = 1024 * 1024;
const silent = { debug: () => undefined } as unknown as Parameters<typeof startMemoryReducer>[0]['log'];

/** Runs the pure rule over (requests started, heap total) per tick; the ticks at which it collects. */
function collections(ticks: ReadonlyArray<readonly [number, number]>): number[] {
  let state = INITIAL_REDUCER_STATE;
  const at: number[] = [];
  ticks.forEach(([started, heap], index) => {
    const step = reducerTick(state, started, heap);
    state = step.collect ? { ...step.state, floor: 40 * MiB } : step.state;
    if (step.collect) at.push(index);
  });
  return at;
}

describe('reducerTick', () => {
  it('collects once, QUIET_TICKS after the last request of a burst that grew the heap', () => {
    const burst = Array.from({ length: 10 }, (_, index) => [(index + 1) * 500, (40 + index * 10) * MiB] as const);
    const quiet = Array.from({ length: 10 }, () => [5_000, 130 * MiB] as const);
    expect(collections([[0, 40 * MiB], ...burst, ...quiet])).toEqual([10 + QUIET_TICKS]);
  });

  it('never collects while requests keep starting', () => {
    expect(collections(Array.from({ length: 60 }, (_, index) => [index + 1, (40 + index * 5) * MiB] as const))).toEqual([]);
  });

  it('does not collect a quiet heap that did not grow', () => {
    expect(collections(Array.from({ length: 30 }, () => [7, 40 * MiB + GROWTH_BYTES - 1] as const))).toEqual([]);
  });

  it('does not collect again in the same quiet period, only after the next burst', () => {
    const ticks: Array<readonly [number, number]> = [[0, 40 * MiB], [100, 100 * MiB]];
    for (let index = 0; index < 10; index++) ticks.push([100, 100 * MiB]); // V8 kept the pages: the heap did not shrink
    ticks.push([200, 100 * MiB], [300, 120 * MiB]);
    for (let index = 0; index < 5; index++) ticks.push([300, 120 * MiB]);
    expect(collections(ticks)).toEqual([1 + QUIET_TICKS, 13 + QUIET_TICKS]);
  });
});

describe('startMemoryReducer', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('collects after a burst ends and stops ticking once stopped', () => {
    vi.useFakeTimers();
    let started = 0;
    let heap = 40 * MiB;
    const collect = vi.fn(() => {
      heap = 45 * MiB;
    });
    const stop = startMemoryReducer({ started: () => started, log: silent, collect, heapTotal: () => heap });
    for (let second = 0; second < 10; second++) {
      started += 1_000;
      heap += 10 * MiB;
      vi.advanceTimersByTime(1_000);
    }
    expect(collect).toHaveBeenCalledTimes(0);
    vi.advanceTimersByTime(QUIET_TICKS * 1_000);
    expect(collect).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(20_000);
    expect(collect).toHaveBeenCalledTimes(1);
    stop();
    started += 1_000;
    heap = 200 * MiB;
    vi.advanceTimersByTime(10_000);
    expect(collect).toHaveBeenCalledTimes(1);
  });
});

describe('fullCollector', () => {
  const oldSpace = (): { committed: number; used: number } => {
    const space = getHeapSpaceStatistics().find((entry) => entry.space_name === 'old_space')!;
    return { committed: space.physical_space_size, used: space.space_used_size };
  };

  it('compacts the old generation: pages whose objects mostly died are given back, not kept for the few left', () => {
    const collect = fullCollector();
    // Objects promoted to the old generation (two collections), then seven in eight dropped: every page keeps a few.
    const held: Array<{ index: number; list: number[] } | null> = Array.from({ length: 400_000 }, (_, index) => ({ index, list: [index] }));
    collect();
    collect();
    for (let index = 0; index < held.length; index++) if (index % 8 !== 0) held[index] = null;
    const before = oldSpace();
    collect();
    const after = oldSpace();
    const freed = before.used - after.used;
    expect(freed).toBeGreaterThan(16 * MiB);
    // A plain full collection leaves nearly all of `freed` committed as free room on those pages.
    expect(after.committed - after.used).toBeLessThan(freed / 4);
    expect(held.filter((entry) => entry !== null)).toHaveLength(50_000);
  });
});

describe('memory.reduce_when_idle', () => {
  it('is on by default and COMPACTOR_REDUCE_MEMORY=false turns it off', async () => {
    const { loadConfig } = await import('../../src/config/load.js');
    const on = loadConfig({ argv: [], env: { COMPACTOR_UPSTREAM_URL: 'http://127.0.0.1:1' } });
    const off = loadConfig({ argv: [], env: { COMPACTOR_UPSTREAM_URL: 'http://127.0.0.1:1', COMPACTOR_REDUCE_MEMORY: 'false' } });
    expect(on.ok && on.config.memory.reduce_when_idle).toBe(true);
    expect(off.ok && off.config.memory.reduce_when_idle).toBe(false);
  });
});
