import { BodiesInFlightError } from '../../errors.js';

/**
 * A bound on the bytes of the large bodies being read and planned at once
 * (`limits.in_flight_bytes`, issue 34 item 2): four uncounted 28.6 MiB
 * bodies at once took 3.8 GB and 110 s, six got no answer in 170 s. A body
 * takes its place before its scan and parse and gives it back once it is
 * forwarded (the parsed body is not held past that, issue 26). Past the
 * bound a newcomer waits its turn, first come first served, up to `waitMs`,
 * then gets a 503 in its format's shape. One body is always let in, however
 * large, so the bound never refuses what `limits.body_bytes` allows; small
 * bodies never take a place (their memory is bounded by the connections).
 */

export class BodyBudget {
  #used = 0;
  readonly #queue: Array<{ readonly bytes: number; readonly admit: () => void }> = [];

  constructor(
    readonly maxBytes: number,
    readonly waitMs: number,
  ) {}

  /** Bodies waiting for a place, for tests and metrics. */
  get waiting(): number {
    return this.#queue.length;
  }

  /** Takes a place for `bytes`; resolves to its release. Throws a BodiesInFlightError after `waitMs` without one. */
  async take(bytes: number): Promise<() => void> {
    if (this.#fits(bytes) && this.#queue.length === 0) return this.#admitted(bytes);
    await new Promise<void>((resolve, reject) => {
      const entry = {
        bytes,
        admit: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      const timer = setTimeout(() => {
        this.#queue.splice(this.#queue.indexOf(entry), 1);
        reject(new BodiesInFlightError(this.maxBytes));
      }, this.waitMs);
      timer.unref();
      this.#queue.push(entry);
    });
    return this.#admitted(bytes, true);
  }

  #fits(bytes: number): boolean {
    return this.#used === 0 || this.#used + bytes <= this.maxBytes;
  }

  #admitted(bytes: number, counted = false): () => void {
    if (!counted) this.#used += bytes;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#used -= bytes;
      this.#admitNext();
    };
  }

  #admitNext(): void {
    while (this.#queue.length > 0 && this.#fits(this.#queue[0]!.bytes)) {
      const next = this.#queue.shift()!;
      this.#used += next.bytes;
      next.admit();
    }
  }
}
