/**
 * A map of at most `capacity` entries: setting one more forgets the least
 * recently used (read or written) first. For state kept per model name,
 * which comes from request text.
 */

/**
 * How many models per-model state remembers. A proxy in front of
 * llama-server sees one model, or a handful; a client inventing names then
 * costs 256 entries (names are at most 256 characters: ~64 KB), where each
 * new name was kept for good (30,000 names made /readyz a 123 MB body).
 */
export const MODELS_REMEMBERED = 256;

export class LruMap<K, V> {
  readonly #capacity: number;
  // A Map iterates in insertion order: re-inserting an entry on each use keeps the least recent first.
  readonly #entries = new Map<K, V>();

  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  get size(): number {
    return this.#entries.size;
  }

  has(key: K): boolean {
    return this.#entries.has(key);
  }

  /** The value of `key`, which becomes the most recently used. */
  get(key: K): V | undefined {
    if (!this.#entries.has(key)) return undefined;
    const value = this.#entries.get(key) as V;
    this.#entries.delete(key);
    this.#entries.set(key, value);
    return value;
  }

  set(key: K, value: V): this {
    this.#entries.delete(key);
    this.#entries.set(key, value);
    if (this.#entries.size > this.#capacity) {
      const oldest = this.#entries.keys().next();
      if (oldest.done !== true) this.#entries.delete(oldest.value);
    }
    return this;
  }

  /** The entries, least recently used first (reading them changes nothing). */
  entries(): IterableIterator<[K, V]> {
    return this.#entries.entries();
  }
}
