import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';

/**
 * Gives back the heap a load burst grew (`memory.reduce_when_idle`). After a
 * burst V8 keeps its young generation at full size and the old generation's
 * limit raised by the burst's garbage; its own memory reducer shrinks them
 * only once the process is idle, and streams that idle for minutes, each
 * trickling a token now and then, keep it from ever being idle. So: once no
 * request has started for `QUIET_TICKS` seconds and the heap has grown
 * `GROWTH_BYTES` past what the last collection left, one full collection,
 * which compacts the old generation, lets V8 release the pages left empty
 * and size both generations to what is live. Never while requests arrive;
 * at most once per quiet period, and only after the heap grew again.
 */

const TICK_MS = 1_000;
/** Seconds with no new request before the heap is collected: a burst has ended, not paused between two requests. */
export const QUIET_TICKS = 2;
/** Growth past what the last collection left that is worth a full collection (~20-60 ms with 1,000 streams open). */
export const GROWTH_BYTES = 16 * 1024 * 1024;

export interface ReducerState {
  /** Requests started, as last seen. */
  readonly seen: number;
  /** Ticks since a request last started. */
  readonly quietTicks: number;
  /** Heap total the last collection left (lowered whenever V8 shrank the heap on its own). */
  readonly floor: number;
}

export const INITIAL_REDUCER_STATE: ReducerState = { seen: 0, quietTicks: 0, floor: 0 };

/** One tick: whether to collect now. Pure, so the rule is tested by counting, not by timing. */
export function reducerTick(state: ReducerState, started: number, heapTotal: number): { readonly state: ReducerState; readonly collect: boolean } {
  const floor = Math.min(state.floor === 0 ? heapTotal : state.floor, heapTotal);
  if (started !== state.seen) return { state: { seen: started, quietTicks: 0, floor }, collect: false };
  const quietTicks = state.quietTicks + 1;
  const collect = quietTicks === QUIET_TICKS && heapTotal - floor >= GROWTH_BYTES;
  return { state: { seen: started, quietTicks, floor }, collect };
}

/** A full collection the way `node --expose-gc` offers one: the flag set at run time, `gc` taken from a new context. */
export function fullCollector(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

export interface MemoryReducerOptions {
  /** How many requests have started so far. */
  readonly started: () => number;
  readonly log: FastifyBaseLogger;
  /** Defaults to a full collection of this process's heap. */
  readonly collect?: () => void;
  readonly heapTotal?: () => number;
}

/** Ticks every second (not holding the process open); returns the stop. */
export function startMemoryReducer(options: MemoryReducerOptions): () => void {
  const collect = options.collect ?? fullCollector();
  const heapTotal = options.heapTotal ?? (() => getHeapStatistics().total_heap_size);
  let state = INITIAL_REDUCER_STATE;
  const timer = setInterval(() => {
    const before = heapTotal();
    const step = reducerTick(state, options.started(), before);
    state = step.state;
    if (!step.collect) return;
    const startedAt = performance.now();
    collect();
    const after = heapTotal();
    state = { ...state, floor: after };
    const MiB = 1024 * 1024;
    options.log.debug({ heapBefore: Math.round(before / MiB), heapAfter: Math.round(after / MiB), ms: Math.round(performance.now() - startedAt) }, 'memory.reduce_when_idle: no request for 2 s, heap collected');
  }, TICK_MS);
  timer.unref();
  return () => clearInterval(timer);
}

/** While the app listens: started with the server, stopped when it closes (an app only injected into never ticks). */
export function reduceMemoryWhenIdle(app: FastifyInstance, started: () => number): void {
  let stop: (() => void) | null = null;
  app.addHook('onListen', async () => {
    stop = startMemoryReducer({ started, log: app.log });
  });
  app.addHook('onClose', async () => stop?.());
}
