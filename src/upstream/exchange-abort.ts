import { EventEmitter } from 'node:events';

/** What undici accepts as a request's signal besides an `AbortSignal`. */
export type AbortEmitter = EventEmitter & { readonly aborted: boolean };

/**
 * How one exchange is aborted (the client left, or a shutdown ended it).
 * Most requests never are, and an `AbortSignal` per request was the largest
 * thing the proxy kept past its requests: V8 came to allocate them straight
 * in the old generation, and all they pointed to (undici's listener and
 * request) was promoted with them (bench/README.md). So the `AbortSignal` is
 * made only when something asks for it (the compaction engine's own upstream
 * calls), and the forwarded request gets an EventEmitter, which undici takes
 * as a signal just as well.
 */
export class ExchangeAbort {
  #aborted = false;
  #controller: AbortController | undefined;
  readonly #emitter: EventEmitter & { aborted: boolean } = Object.assign(new EventEmitter(), { aborted: false });

  get aborted(): boolean {
    return this.#aborted;
  }

  /** An `AbortSignal` that follows this exchange, made on first use. */
  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort();
    }
    return this.#controller.signal;
  }

  /** The same, as an EventEmitter: for undici. */
  get emitter(): AbortEmitter {
    return this.#emitter;
  }

  abort(): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#emitter.aborted = true;
    this.#emitter.emit('abort');
    this.#controller?.abort();
  }
}
