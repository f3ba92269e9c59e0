import type { CompactionLogger } from '../ports.js';

/**
 * Values read from a shared store that were not what compactor writes (a
 * damaged, tampered, unsigned or badly signed one): each is ignored, counted,
 * and logged at warn once, by its reason and size, never its text (it may
 * hold anything, a tenant's messages included).
 */

export type BadValueReason = 'unsigned' | 'signature' | 'too-large' | 'encoding' | 'json' | 'schema';

/** Bad values named in the log, remembered so each is logged once (bounded: a flood of them logs at most this many). */
const LOGGED_BAD_VALUES = 1_000;

export class BadValues {
  readonly #logged = new Set<string>();
  readonly #logger: CompactionLogger | undefined;
  readonly #onBadValue: ((reason: BadValueReason) => void) | undefined;

  constructor(logger: CompactionLogger | undefined, onBadValue: ((reason: BadValueReason) => void) | undefined) {
    this.#logger = logger;
    this.#onBadValue = onBadValue;
  }

  /** One bad value of `kind` (an epoch, a ratio, a back-off), read as `value`. */
  report(kind: string, bad: { readonly bad: BadValueReason; readonly detail: string }, value: Buffer): void {
    this.#onBadValue?.(bad.bad);
    const fingerprint = `${kind}:${bad.bad}:${value.length}:${value.subarray(0, 64).toString('base64')}`;
    if (this.#logged.has(fingerprint) || this.#logged.size >= LOGGED_BAD_VALUES) return;
    this.#logged.add(fingerprint);
    this.#logger?.warn({ value: kind, reason: bad.bad, detail: bad.detail, bytes: value.length }, `epoch store: a stored value is not a valid ${kind}; treated as a miss`);
  }
}
