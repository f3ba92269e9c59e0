import { describe, it, expect } from 'vitest';
import { SingleFlight } from '../../../src/compaction/epochs/single-flight.js';

/** A promise settled by hand. */
function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void; reject: (error: unknown) => void } {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((onResolve, onReject) => {
    resolve = onResolve;
    reject = onReject;
  });
  return { promise, resolve, reject };
}

/** A computation the test settles by hand, counting its starts and keeping the signal it was given. */
function computation<T>() {
  const state = { starts: 0, signals: [] as AbortSignal[], gate: deferred<T>() };
  const compute = (signal: AbortSignal): Promise<T> => {
    state.starts++;
    state.signals.push(signal);
    return state.gate.promise;
  };
  return { state, compute };
}

/** Lets pending promise callbacks run. */
const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('SingleFlight', () => {
  it('concurrent callers of a key share one computation and its value', async () => {
    const flights = new SingleFlight<string>();
    const { state, compute } = computation<string>();
    const first = flights.run('k', compute, new AbortController().signal);
    const second = flights.run('k', compute, new AbortController().signal);
    const third = flights.run('k', compute);
    expect(flights.has('k')).toBe(true);
    expect(flights.size).toBe(1);
    await tick();
    state.gate.resolve('notes');
    await expect(Promise.all([first, second, third])).resolves.toEqual(['notes', 'notes', 'notes']);
    expect(state.starts).toBe(1);
  });

  it('runs different keys separately', async () => {
    const flights = new SingleFlight<string>();
    let starts = 0;
    const compute = async (): Promise<string> => `value ${++starts}`;
    await expect(Promise.all([flights.run('a', compute), flights.run('b', compute)])).resolves.toEqual(['value 1', 'value 2']);
  });

  it('a caller that leaves rejects only its own promise; the computation goes on for the others', async () => {
    const flights = new SingleFlight<string>();
    const { state, compute } = computation<string>();
    const leaving = new AbortController();
    const staying = new AbortController();
    const left = flights.run('k', compute, leaving.signal);
    const stays = flights.run('k', compute, staying.signal);
    await tick();
    const reason = new Error('client went away');
    leaving.abort(reason);
    await expect(left).rejects.toBe(reason);
    expect(state.signals[0]!.aborted).toBe(false);
    state.gate.resolve('notes');
    await expect(stays).resolves.toBe('notes');
  });

  it("aborts the computation's signal when every caller has left", async () => {
    const flights = new SingleFlight<string>();
    const { state, compute } = computation<string>();
    const one = new AbortController();
    const two = new AbortController();
    const first = flights.run('k', compute, one.signal);
    const second = flights.wait('k', two.signal);
    await tick();
    one.abort(new Error('one'));
    await expect(first).rejects.toThrow('one');
    expect(state.signals[0]!.aborted).toBe(false);
    two.abort(new Error('two'));
    await expect(second).rejects.toThrow('two');
    expect(state.signals[0]!.aborted).toBe(true);
    state.gate.reject(state.signals[0]!.reason);
    await tick();
    expect(flights.has('k')).toBe(false);
  });

  it('a caller without a signal keeps the computation alive', async () => {
    const flights = new SingleFlight<string>();
    const { state, compute } = computation<string>();
    const background = flights.run('k', compute);
    const leaving = new AbortController();
    const left = flights.run('k', compute, leaving.signal);
    await tick();
    leaving.abort(new Error('gone'));
    await expect(left).rejects.toThrow('gone');
    expect(state.signals[0]!.aborted).toBe(false);
    state.gate.resolve('notes');
    await expect(background).resolves.toBe('notes');
  });

  it('a caller arriving after every other caller left gets a fresh computation, not their abort', async () => {
    const flights = new SingleFlight<string>();
    let starts = 0;
    const gates = [deferred<string>(), deferred<string>()];
    // Like a summary queued behind another one: it notices the abort only when it gets its turn.
    const compute = (): Promise<string> => gates[starts++]!.promise;
    const leaving = new AbortController();
    const left = flights.run('k', compute, leaving.signal);
    await tick();
    leaving.abort(new Error('first client went away'));
    await expect(left).rejects.toThrow('first client went away');
    // The abandoned computation has not settled yet when the next request of the conversation comes.
    expect(flights.has('k')).toBe(false);
    await expect(flights.wait('k', new AbortController().signal)).resolves.toBeUndefined();
    const next = flights.run('k', compute, new AbortController().signal);
    await tick();
    gates[0]!.reject(new Error('first client went away'));
    gates[1]!.resolve('fresh notes');
    await expect(next).resolves.toBe('fresh notes');
    expect(starts).toBe(2);
    await tick();
    // The abandoned computation settling does not free the key of the fresh one early.
    expect(flights.size).toBe(0);
  });

  it('a caller whose signal is already aborted is rejected without keeping a computation running', async () => {
    const flights = new SingleFlight<string>();
    const { state, compute } = computation<string>();
    const aborted = new AbortController();
    aborted.abort(new Error('already gone'));
    let promise: Promise<string> | undefined;
    expect(() => {
      promise = flights.run('k', compute, aborted.signal);
    }).not.toThrow();
    await expect(promise).rejects.toThrow('already gone');
    await tick();
    // Nobody waits for it: it is not started, or it is told to stop.
    expect(state.starts === 0 || state.signals[0]!.aborted).toBe(true);
  });

  it('frees the key once the computation settles, after a value and after a rejection', async () => {
    const flights = new SingleFlight<string>();
    let starts = 0;
    const fails = async (): Promise<string> => {
      starts++;
      throw new Error('summary failed');
    };
    await expect(flights.run('k', fails, new AbortController().signal)).rejects.toThrow('summary failed');
    expect(flights.has('k')).toBe(false);
    expect(flights.size).toBe(0);
    await expect(flights.run('k', async () => `ok ${++starts}`)).resolves.toBe('ok 2');
    expect(flights.has('k')).toBe(false);
    await expect(flights.run('k', async () => `ok ${++starts}`)).resolves.toBe('ok 3');
  });

  it('wait resolves to undefined when nothing runs, and to the value of the running computation', async () => {
    const flights = new SingleFlight<string>();
    await expect(flights.wait('k')).resolves.toBeUndefined();
    const { state, compute } = computation<string>();
    const running = flights.run('k', compute);
    const waiting = flights.wait('k', new AbortController().signal);
    await tick();
    state.gate.resolve('notes');
    await expect(waiting).resolves.toBe('notes');
    await expect(running).resolves.toBe('notes');
    expect(state.starts).toBe(1);
  });

  it('passes a rejection to every caller', async () => {
    const flights = new SingleFlight<string>();
    const { state, compute } = computation<string>();
    const first = flights.run('k', compute, new AbortController().signal);
    const second = flights.run('k', compute);
    state.gate.reject(new Error('upstream answered 500'));
    await expect(first).rejects.toThrow('upstream answered 500');
    await expect(second).rejects.toThrow('upstream answered 500');
  });
});
