import type { ChatMessage } from '../transcript/message.js';
import { type SlotFiles, slotFileName } from './slot-files.js';

/**
 * What a slot's KV holds, kept across evictions with llama-server's slot
 * files (`upstream.slot_save`): before a request runs in a slot, the
 * conversation it still holds is saved when it lost its home, the files past
 * the bound are emptied while the slot is about to be overwritten anyway, and
 * the request's own conversation is restored when the slot does not hold it;
 * before a summary its conversation is saved, so a turn can restore it
 * elsewhere while the summary runs. A server that refuses a save (no
 * `--slot-save-path`) stops saving for good; a failed restore forgets the
 * file (the conversation is read again, as without files).
 */

/**
 * What asks for a slot: a conversation's turn or summary (by its home key),
 * or a guest (a prepend summary). `background` (summaries): whether it is
 * background work now, which leaves its slot queue when it has waited
 * `backgroundWaitMs` (as long as it stays useful; the scheduler's `waitMs`
 * when not said). `tokens`: the prompt's size, what reading it anew
 * elsewhere would cost. `history`: a turn's messages as forwarded, what its
 * slot holds once it ran (a summary of its conversation waiting meanwhile
 * is given them: SlotLease.history).
 */
export type SlotWork = ({ readonly kind: 'turn' | 'summary'; readonly key: string; readonly tokens?: number; readonly history?: readonly ChatMessage[] } | { readonly kind: 'guest' }) & {
  readonly background?: () => boolean;
  readonly backgroundWaitMs?: number;
};

export interface SlotActions {
  /** `?action=save`: the bytes written, or null when the server would not (no `--slot-save-path`). */
  save(slot: number, filename: string): Promise<number | null>;
  restore(slot: number, filename: string): Promise<boolean>;
  erase(slot: number): Promise<boolean>;
}

export interface SlotKeeperOptions {
  readonly actions: SlotActions;
  readonly save: boolean;
  readonly files: SlotFiles;
  readonly onSaveRefused?: () => void;
}

export interface HeldSlot {
  readonly id: number;
  /** Whose conversation the slot's KV holds (null: none, or a guest's). */
  holds: string | null;
}

export class SlotKeeper {
  readonly #options: SlotKeeperOptions;
  readonly #files: SlotFiles;
  #saving: boolean;
  readonly #counts = { saves: 0, restores: 0, saveFailures: 0, restoreFailures: 0 };

  constructor(options: SlotKeeperOptions) {
    this.#options = options;
    this.#files = options.files;
    this.#saving = options.save;
  }

  stats(): { saves: number; restores: number; saveFailures: number; restoreFailures: number; files: number; filesBytes: number; filesErased: number } {
    return { ...this.#counts, files: this.#files.count, filesBytes: this.#files.totalBytes, filesErased: this.#files.erased };
  }

  /** Whether `work`'s conversation could be restored from a file in another slot (saved before its summary, or when evicted). */
  canRestore(work: SlotWork): boolean {
    return this.#saving && work.kind !== 'guest' && this.#files.has(work.key);
  }

  /** Before `work` runs in `slot`; `homed(key)` says whether a conversation still has a home slot (then its KV there is not the only copy). */
  async prepare(slot: HeldSlot, work: SlotWork, homed: (key: string) => boolean): Promise<void> {
    const key = work.kind === 'guest' ? null : work.key;
    if (slot.holds !== key) {
      const previous = slot.holds;
      if (this.#saving && previous !== null && !homed(previous)) await this.#save(slot, previous);
      if (this.#saving) await this.#emptyDropped(slot);
      if (key !== null && this.#saving && this.#files.has(key)) await this.#restore(slot, key);
      slot.holds = key;
    } else if (work.kind === 'summary' && this.#saving) {
      await this.#save(slot, work.key);
    }
  }

  async #save(slot: HeldSlot, key: string): Promise<void> {
    const bytes = await this.#options.actions.save(slot.id, slotFileName(key)).catch(() => null);
    if (bytes === null) {
      this.#counts.saveFailures++;
      this.#saving = false;
      this.#options.onSaveRefused?.();
      return;
    }
    this.#counts.saves++;
    this.#files.saved(key, bytes);
  }

  async #restore(slot: HeldSlot, key: string): Promise<void> {
    const restored = await this.#options.actions.restore(slot.id, slotFileName(key)).catch(() => false);
    if (restored) this.#counts.restores++;
    else {
      this.#counts.restoreFailures++;
      this.#files.forget(key);
    }
  }

  /** llama-server cannot delete a file: a dropped one is overwritten with the slot erased (it is about to be overwritten anyway). */
  async #emptyDropped(slot: HeldSlot): Promise<void> {
    const dropped = this.#files.overBound();
    if (dropped.length === 0) return;
    if (!(await this.#options.actions.erase(slot.id).catch(() => false))) return;
    slot.holds = null;
    for (const key of dropped) await this.#options.actions.save(slot.id, slotFileName(key)).catch(() => null);
  }
}
