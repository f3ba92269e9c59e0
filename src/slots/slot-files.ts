/**
 * The slot files compactor wrote on the llama-server (`--slot-save-path`),
 * one per evicted conversation, named by its home key, and their bytes
 * (`n_written` of the save). Bounded by `upstream.slot_save_max_bytes`: past
 * it the oldest files are dropped first. llama-server has no call that
 * deletes a file, so a dropped file is overwritten with an empty slot (an
 * erased slot saved under its name) the next time a slot is being given to
 * another conversation anyway.
 */

export function slotFileName(key: string): string {
  // Keys are base64url prefix hashes: letters, digits, '-' and '_', which llama-server accepts in a file name.
  return `compactor-${key}.bin`;
}

export class SlotFiles {
  /** Insertion order is age: a file saved again moves to the end. */
  readonly #bytes = new Map<string, number>();
  #total = 0;
  erased = 0;

  constructor(readonly maxBytes: number) {}

  has(key: string): boolean {
    return this.#bytes.has(key);
  }

  get totalBytes(): number {
    return this.#total;
  }

  get count(): number {
    return this.#bytes.size;
  }

  saved(key: string, bytes: number): void {
    this.forget(key);
    this.#bytes.set(key, bytes);
    this.#total += bytes;
  }

  forget(key: string): void {
    const bytes = this.#bytes.get(key);
    if (bytes === undefined) return;
    this.#bytes.delete(key);
    this.#total -= bytes;
  }

  /** The keys of the oldest files to drop until the rest fit the bound (forgotten here; the caller empties them). */
  overBound(): string[] {
    const dropped: string[] = [];
    for (const key of [...this.#bytes.keys()]) {
      if (this.#total <= this.maxBytes) break;
      this.forget(key);
      dropped.push(key);
    }
    this.erased += dropped.length;
    return dropped;
  }
}
