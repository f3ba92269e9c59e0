import type { CompactionLogger } from '../ports.js';
import type { Connectivity } from './shared-store.js';

/**
 * Degrading to memory, for any shared store: one command that rejects, times
 * out or cannot be sent is a fault, counted and answered with undefined (the
 * caller goes on with this replica's memory); an outage is warned once, and
 * its end said once. One per shared store: its epochs (repository.ts), every
 * conversation's view of them and its learning port share it.
 */

export type StoreOperation = 'lookup' | 'load' | 'save' | 'lease' | 'ratio' | 'backoff';

export interface StoreHealthOptions {
  readonly logger?: CompactionLogger | undefined;
  /** Told of each command that failed (the metrics). */
  readonly onFault?: ((operation: StoreOperation) => void) | undefined;
  /** Named in the outage's log lines. */
  readonly name: string;
}

export class StoreHealth {
  readonly #store: Connectivity;
  readonly #options: StoreHealthOptions;
  /** Whether the last command failed. */
  #faulty = false;

  constructor(store: Connectivity, options: StoreHealthOptions) {
    this.#store = store;
    this.#options = options;
    store.onReady(() => this.#recovered());
  }

  /** Whether the replica is working from memory now (the shared store down, or its last command failed). */
  get degraded(): boolean {
    return this.#faulty || !this.#store.ready;
  }

  /** Runs one command; undefined when it failed or timed out (counted, the outage warned once). */
  async call<T>(operation: StoreOperation, command: () => Promise<T>): Promise<T | undefined> {
    const store = this.#store;
    if (!store.ready && store.firstConnection !== undefined) await store.firstConnection();
    if (!store.ready) {
      this.#fault(operation, store.whyNotReady?.() ?? 'not connected');
      return undefined;
    }
    try {
      const result = await command();
      if (this.#faulty) this.#recovered();
      return result;
    } catch (error) {
      this.#fault(operation, error instanceof Error ? error.message : String(error));
      return undefined;
    }
  }

  #fault(operation: StoreOperation, reason: string): void {
    this.#options.onFault?.(operation);
    if (this.#faulty) return;
    this.#faulty = true;
    this.#options.logger?.warn({ store: this.#options.name, operation, reason }, 'epoch store unavailable: using this replica\'s memory until it is back');
  }

  #recovered(): void {
    if (!this.#faulty) return;
    this.#faulty = false;
    this.#options.logger?.info({ store: this.#options.name }, 'epoch store back: epochs are shared again');
  }
}
