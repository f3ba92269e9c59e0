/**
 * The slots of a llama-server, as a pure model (no I/O, no clock): which slot
 * a task lands in, how many of its prompt tokens come from a cache and how
 * many are processed, what the host-RAM prompt cache (`--cache-ram`) and the
 * slot files (`--slot-save-path`) hold. The HTTP double (slot-llama.ts) and
 * the slot bench drive it; tests read its counters.
 *
 * What it copies from llama-server (tools/server, server-context.cpp):
 * - A task without `id_slot` goes to the idle slot whose prompt shares the
 *   longest prefix with it when that prefix is more than `similarity` (0.1,
 *   `--slot-prompt-similarity`) of the task's prompt, else to the least
 *   recently used idle slot; with no idle slot it waits.
 * - A task with `id_slot` goes to that slot, and waits while it is busy.
 *   Pinning to a busy slot is what the real server does badly (its prompt
 *   caches are moved in and out of the busy slot and some requests fail):
 *   counted as `busyPins`, and answered 503 when `failBusyPins` is set.
 * - When a slot takes a prompt that keeps less than half of what it held,
 *   what it held goes to the RAM cache (bounded, oldest dropped first); a
 *   prompt that shares more with a cached entry than with its slot loads it.
 * - save / restore / erase of a slot by file name, as `/slots/{id}?action=`.
 *
 * Prompts are strings; a token is `tokensPerChar` of a character, so a common
 * prefix of characters is a common prefix of tokens.
 */

export interface SlotModelOptions {
  readonly slots: number;
  /** Tokens the RAM prompt cache holds; 0 is `--cache-ram 0`. */
  readonly cacheRamTokens?: number;
  readonly similarity?: number;
  readonly tokensPerChar?: number;
  /** Bytes a slot file takes per token (the real one: ~57 KB for a 7B model). */
  readonly bytesPerToken?: number;
  /** Another server's files: two servers started with the same `--slot-save-path` on a shared disk. */
  readonly files?: Map<string, string>;
}

export interface SlotState {
  readonly id: number;
  held: string;
  busy: boolean;
  lastUsed: number;
}

export interface SlotCounters {
  promptTokens: number;
  reusedTokens: number;
  processedTokens: number;
  busyPins: number;
  ramLoads: number;
  saves: number;
  restores: number;
  erases: number;
}

interface CachedPrompt {
  readonly prompt: string;
  readonly tokens: number;
}

export class SlotModel {
  readonly slots: SlotState[];
  readonly counters: SlotCounters = { promptTokens: 0, reusedTokens: 0, processedTokens: 0, busyPins: 0, ramLoads: 0, saves: 0, restores: 0, erases: 0 };
  /** The slot files of `--slot-save-path`: `options.files` when servers share one path (a shared disk), else this server's own. */
  readonly files: Map<string, string>;
  readonly #ram: CachedPrompt[] = [];
  readonly #cacheRamTokens: number;
  readonly #similarity: number;
  readonly #tokensPerChar: number;
  readonly #bytesPerToken: number;
  #tick = 0;

  constructor(options: SlotModelOptions) {
    this.slots = Array.from({ length: options.slots }, (_, id) => ({ id, held: '', busy: false, lastUsed: 0 }));
    this.files = options.files ?? new Map();
    this.#cacheRamTokens = options.cacheRamTokens ?? Number.POSITIVE_INFINITY;
    this.#similarity = options.similarity ?? 0.1;
    this.#tokensPerChar = options.tokensPerChar ?? 0.25;
    this.#bytesPerToken = options.bytesPerToken ?? 272;
  }

  tokensOf(text: string): number {
    return Math.ceil(text.length * this.#tokensPerChar);
  }

  /** The slot a task would start in now, or undefined when it must wait (no idle slot, or its pinned slot is busy). */
  choose(prompt: string, idSlot?: number): number | undefined {
    if (idSlot !== undefined && idSlot >= 0) return this.slots[idSlot]?.busy === false ? idSlot : undefined;
    const idle = this.slots.filter((slot) => !slot.busy);
    if (idle.length === 0) return undefined;
    let best: SlotState | undefined;
    let bestShare = this.#similarity;
    for (const slot of idle) {
      const share = commonPrefixLength(slot.held, prompt) / Math.max(1, prompt.length);
      if (share > bestShare) [best, bestShare] = [slot, share];
    }
    return (best ?? idle.reduce((oldest, slot) => (slot.lastUsed < oldest.lastUsed ? slot : oldest))).id;
  }

  /**
   * Where the longest copy of `prompt`'s prefix is now, in tokens: the slot
   * `slotId` itself, the best other idle slot, the best busy slot, the RAM
   * cache. Read before `begin` to say why a task re-read what it did.
   */
  whereIs(slotId: number, prompt: string): { own: number; idle: number; busy: number; ram: number } {
    const tokens = (chars: number): number => this.tokensOf(prompt.slice(0, chars));
    let idle = 0;
    let busy = 0;
    for (const slot of this.slots) {
      if (slot.id === slotId) continue;
      const shared = commonPrefixLength(slot.held, prompt);
      if (slot.busy) busy = Math.max(busy, shared);
      else idle = Math.max(idle, shared);
    }
    return { own: tokens(commonPrefixLength(this.#slot(slotId).held, prompt)), idle: tokens(idle), busy: tokens(busy), ram: tokens(this.#bestCached(prompt)?.shared ?? 0) };
  }

  /** A task starts in `slotId`: what of its prompt is reused, what is processed. */
  begin(slotId: number, prompt: string): { cacheN: number; promptN: number } {
    const slot = this.#slot(slotId);
    slot.busy = true;
    slot.lastUsed = ++this.#tick;
    let shared = commonPrefixLength(slot.held, prompt);
    if (slot.held !== '' && shared < slot.held.length / 2) this.#cache(slot.held);
    const loaded = this.#bestCached(prompt);
    if (loaded !== undefined && loaded.shared > shared) {
      this.#ram.splice(loaded.index, 1);
      this.counters.ramLoads++;
      shared = loaded.shared;
    }
    const promptTokens = this.tokensOf(prompt);
    // llama-server always evaluates at least the last token of the prompt.
    const cacheN = Math.min(promptTokens - 1, this.tokensOf(prompt.slice(0, shared)));
    this.counters.promptTokens += promptTokens;
    this.counters.reusedTokens += cacheN;
    this.counters.processedTokens += promptTokens - cacheN;
    slot.held = prompt;
    return { cacheN, promptN: promptTokens - cacheN };
  }

  /** The task ended: the slot holds its prompt and the answer, and is idle. */
  end(slotId: number, answer: string): void {
    const slot = this.#slot(slotId);
    slot.held += answer;
    slot.busy = false;
  }

  /** `?action=save`: the slot's tokens written to a file; undefined when the slot is busy. */
  save(slotId: number, filename: string): { nSaved: number; nWritten: number } | undefined {
    const slot = this.#slot(slotId);
    if (slot.busy) return undefined;
    this.files.set(filename, slot.held);
    this.counters.saves++;
    const nSaved = this.tokensOf(slot.held);
    return { nSaved, nWritten: nSaved * this.#bytesPerToken };
  }

  /** `?action=restore`: the file's tokens loaded into the slot; undefined when busy or no such file. */
  restore(slotId: number, filename: string): { nRestored: number; nRead: number } | undefined {
    const slot = this.#slot(slotId);
    const held = this.files.get(filename);
    if (slot.busy || held === undefined) return undefined;
    // What the slot held is overwritten, not kept in the RAM cache.
    slot.held = held;
    this.counters.restores++;
    const nRestored = this.tokensOf(held);
    return { nRestored, nRead: nRestored * this.#bytesPerToken };
  }

  /** `?action=erase`: the slot forgets its tokens. */
  erase(slotId: number): { nErased: number } | undefined {
    const slot = this.#slot(slotId);
    if (slot.busy) return undefined;
    const nErased = this.tokensOf(slot.held);
    slot.held = '';
    this.counters.erases++;
    return { nErased };
  }

  /** Tokens reused of tokens read, 0..1. */
  get reuse(): number {
    return this.counters.promptTokens === 0 ? 0 : this.counters.reusedTokens / this.counters.promptTokens;
  }

  get ramTokens(): number {
    return this.#ram.reduce((sum, entry) => sum + entry.tokens, 0);
  }

  #slot(slotId: number): SlotState {
    const slot = this.slots[slotId];
    if (slot === undefined) throw new RangeError(`no slot ${slotId}`);
    return slot;
  }

  #cache(prompt: string): void {
    const tokens = this.tokensOf(prompt);
    if (tokens > this.#cacheRamTokens) return;
    this.#ram.push({ prompt, tokens });
    while (this.ramTokens > this.#cacheRamTokens) this.#ram.shift();
  }

  #bestCached(prompt: string): { index: number; shared: number } | undefined {
    let best: { index: number; shared: number } | undefined;
    this.#ram.forEach((entry, index) => {
      const shared = commonPrefixLength(entry.prompt, prompt);
      if (shared > (best?.shared ?? 0)) best = { index, shared };
    });
    return best;
  }
}

export function commonPrefixLength(a: string, b: string): number {
  const length = Math.min(a.length, b.length);
  let index = 0;
  while (index < length && a.charCodeAt(index) === b.charCodeAt(index)) index++;
  return index;
}
