import { afterEach, describe, expect, it, vi } from 'vitest';
import { GROWTH_BYTES, INITIAL_REDUCER_STATE, QUIET_TICKS, reducerTick, startMemoryReducer } from '../../src/http/ops/memory-reducer.js';

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

describe('memory.reduce_when_idle', () => {
  it('is on by default and COMPACTOR_REDUCE_MEMORY=false turns it off', async () => {
    const { loadConfig } = await import('../../src/config/load.js');
    const on = loadConfig({ argv: [], env: { COMPACTOR_UPSTREAM_URL: 'http://127.0.0.1:1' } });
    const off = loadConfig({ argv: [], env: { COMPACTOR_UPSTREAM_URL: 'http://127.0.0.1:1', COMPACTOR_REDUCE_MEMORY: 'false' } });
    expect(on.ok && on.config.memory.reduce_when_idle).toBe(true);
    expect(off.ok && off.config.memory.reduce_when_idle).toBe(false);
  });
});
