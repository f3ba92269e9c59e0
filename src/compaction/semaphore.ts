/** At most `limit` holders at once; the rest wait in arrival order. */
export class Semaphore {
  #available: number;
  readonly #waiting: Array<() => void> = [];

  constructor(limit: number) {
    this.#available = Math.max(1, Math.floor(limit));
  }

  async use<T>(work: () => Promise<T>): Promise<T> {
    if (this.#available > 0) this.#available--;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve));
    try {
      return await work();
    } finally {
      const next = this.#waiting.shift();
      if (next !== undefined) next();
      else this.#available++;
    }
  }
}
