/**
 * How compactor ends the requests still in flight when a shutdown's grace
 * period runs out. Each request registers a callback and forgets it when its
 * response closes: a set does that in O(1), where an `AbortSignal` listener
 * per request (EventTarget bookkeeping) cost some 2% of the proxy's CPU under
 * load (bench/README.md).
 */
export class Shutdown {
  readonly #callbacks = new Set<(reason: unknown) => void>();
  #reason: unknown;
  #ended = false;

  get ended(): boolean {
    return this.#ended;
  }

  /**
   * Calls `end` with the shutdown's reason when requests in flight are ended
   * (at once when that already happened). Returns the function that forgets it.
   */
  onEnd(end: (reason: unknown) => void): () => void {
    if (this.#ended) {
      end(this.#reason);
      return forgetNothing;
    }
    this.#callbacks.add(end);
    return () => {
      this.#callbacks.delete(end);
    };
  }

  /** Ends every request in flight with `reason`, and any registered later. */
  endAll(reason: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#reason = reason;
    const callbacks = [...this.#callbacks];
    this.#callbacks.clear();
    for (const end of callbacks) end(reason);
  }
}

function forgetNothing(): void {}
