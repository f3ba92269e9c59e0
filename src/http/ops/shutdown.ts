/**
 * How compactor ends the requests still in flight when a shutdown's grace
 * period runs out. Each request registers itself and is forgotten when its
 * response closes: a set does that in O(1), where an `AbortSignal` listener
 * per request (EventTarget bookkeeping) cost some 2% of the proxy's CPU under
 * load (bench/README.md). A request registers an object it already has (the
 * chat exchange), not a closure made for the purpose.
 */
export interface Ending {
  /** Ends this request with the shutdown's reason. */
  end(reason: unknown): void;
}

export class Shutdown {
  readonly #endings = new Set<Ending>();
  #reason: unknown;
  #ended = false;

  /** Ends `ending` with the shutdown's reason when requests in flight are ended (at once when that already happened). */
  onEnd(ending: Ending): void {
    if (this.#ended) {
      ending.end(this.#reason);
      return;
    }
    this.#endings.add(ending);
  }

  /** Forgets a request that finished. */
  forget(ending: Ending): void {
    this.#endings.delete(ending);
  }

  /** Ends every request in flight with `reason`, and any registered later. */
  endAll(reason: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#reason = reason;
    const endings = [...this.#endings];
    this.#endings.clear();
    for (const ending of endings) ending.end(reason);
  }
}
