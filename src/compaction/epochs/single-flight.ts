/**
 * One computation per key at a time: callers asking for a key that is being
 * computed join it instead of starting a second one. Each caller may leave
 * (its signal aborts); when every caller has left, the computation's own
 * signal aborts, so an upstream call nobody waits for is cancelled. A caller
 * without a signal never leaves (a background computation runs to its end).
 */

interface Flight<T> {
  readonly promise: Promise<T>;
  readonly controller: AbortController;
  waiters: number;
}

export class SingleFlight<T> {
  readonly #flights = new Map<string, Flight<T>>();

  /** Whether a computation is running for `key` (one every caller has left is winding down, and does not count). */
  has(key: string): boolean {
    return this.#live(key) !== undefined;
  }

  get size(): number {
    return this.#flights.size;
  }

  /** Joins the computation for `key`, starting it with `compute` when none runs. */
  run(key: string, compute: (signal: AbortSignal) => Promise<T>, callerSignal?: AbortSignal): Promise<T> {
    // A caller that has already left starts nothing and joins nothing.
    if (callerSignal?.aborted === true) return Promise.reject(callerSignal.reason);
    // A computation every caller has left is aborted and only winding down: joining it would hand this
    // caller another caller's abort, so a new one replaces it (the old one's cleanup checks it is still current).
    let flight = this.#live(key);
    if (flight === undefined) {
      const controller = new AbortController();
      const promise = Promise.resolve()
        .then(() => compute(controller.signal))
        .finally(() => {
          if (this.#flights.get(key) === flight) this.#flights.delete(key);
        });
      flight = { promise, controller, waiters: 0 };
      this.#flights.set(key, flight);
    }
    return this.#join(flight, callerSignal);
  }

  /** Waits for the computation running for `key`, if any (resolves to undefined when none runs). */
  async wait(key: string, callerSignal?: AbortSignal): Promise<T | undefined> {
    const flight = this.#live(key);
    return flight === undefined ? undefined : this.#join(flight, callerSignal);
  }

  /** The flight for `key` unless every caller has left it. */
  #live(key: string): Flight<T> | undefined {
    const flight = this.#flights.get(key);
    return flight === undefined || flight.controller.signal.aborted ? undefined : flight;
  }

  #join(flight: Flight<T>, callerSignal: AbortSignal | undefined): Promise<T> {
    if (callerSignal === undefined) {
      flight.waiters = Number.POSITIVE_INFINITY;
      return flight.promise;
    }
    callerSignal.throwIfAborted();
    flight.waiters++;
    return new Promise<T>((resolve, reject) => {
      const leave = (): void => {
        flight.waiters--;
        if (flight.waiters <= 0) flight.controller.abort(callerSignal.reason);
        reject(callerSignal.reason);
      };
      callerSignal.addEventListener('abort', leave, { once: true });
      flight.promise.then(
        (value) => {
          callerSignal.removeEventListener('abort', leave);
          flight.waiters--;
          resolve(value);
        },
        (error: unknown) => {
          callerSignal.removeEventListener('abort', leave);
          flight.waiters--;
          reject(error);
        },
      );
    });
  }
}
