/** The `model` label of the metrics (metrics.ts), bounded. */

/**
 * Models named in labels; later names count as {@link OTHER_MODEL}. The name
 * comes from the client, so without a bound a client could grow the scrape
 * without end; 64 is more models than one server (or a router in front of a
 * few) serves, and keeps the compactions family, the widest (5 tiers × 7
 * outcomes), to at most some 2,300 series.
 */
const MAX_MODEL_LABELS = 64;
const OTHER_MODEL = 'other';

/** The label of a model: its name for the first {@link MAX_MODEL_LABELS} seen, then "other". */
export class ModelLabels {
  readonly #seen = new Set<string>();
  readonly #limit: number;

  constructor(limit = MAX_MODEL_LABELS) {
    this.#limit = limit;
  }

  of(model: string): string {
    if (this.#seen.has(model)) return model;
    if (this.#seen.size >= this.#limit) return OTHER_MODEL;
    this.#seen.add(model);
    return model;
  }
}
