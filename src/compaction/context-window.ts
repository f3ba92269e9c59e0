import { MODELS_REMEMBERED, perModel } from './per-model.js';
import { type CallHeaders, numberAt, type UpstreamJson } from './upstream-json.js';

/**
 * The context window the upstream serves per slot, per model: from the
 * configuration, else llama-server's `GET /props`
 * (`default_generation_settings.n_ctx`, already per slot), else
 * `GET /v1/models` (`data[].meta.n_ctx`, then `n_ctx_train`).
 *
 * The upstream's two answers are kept, not one lookup per model: model
 * names come from requests, and each new one cost a `/props` call (and a
 * `/v1/models` one on a server without `/props`), so a client inventing
 * names made compactor ask the upstream once per request.
 */

/**
 * How long the upstream's answers are trusted, so how often it is asked at
 * most: a restarted llama-server may come back with another `-c`.
 */
const WINDOW_TTL_MS = 60_000;

export interface ContextWindowsOptions {
  /** The configured window of a model: a number of tokens, or 'auto' to ask the upstream. */
  readonly configured: (model: string) => number | 'auto';
  readonly upstream: UpstreamJson;
  readonly now?: () => number;
  /** Told once per model when no window can be found (only `max_messages` can trigger then). */
  readonly onUnknown?: (model: string) => void;
}

/** A `/v1/models` entry, as far as windows go. */
interface ListedModel {
  readonly id: unknown;
  readonly window: number | null;
}

/** An upstream answer kept for {@link WINDOW_TTL_MS}, asked for once however many wait on it. */
class RecentAnswer<T> {
  #answer: { readonly value: T; readonly at: number } | undefined;
  #asking: Promise<T> | undefined;

  constructor(private readonly now: () => number) {}

  get(ask: () => Promise<T>): T | Promise<T> {
    if (this.#answer !== undefined && this.now() - this.#answer.at < WINDOW_TTL_MS) return this.#answer.value;
    this.#asking ??= ask()
      .then((value) => {
        this.#answer = { value, at: this.now() };
        return value;
      })
      .finally(() => (this.#asking = undefined));
    return this.#asking;
  }
}

/** A window asked for and not found (lru-cache holds no null). */
const UNKNOWN = 'unknown';

export class ContextWindows {
  readonly #options: ContextWindowsOptions;
  /** The windows found, by model: for `/readyz` and the warning, not for the upstream's sake. */
  readonly #known = perModel<number | typeof UNKNOWN>();
  readonly #warned = perModel<true>();
  readonly #props: RecentAnswer<number | null>;
  readonly #models: RecentAnswer<readonly ListedModel[]>;

  constructor(options: ContextWindowsOptions) {
    this.#options = options;
    const now = options.now ?? Date.now;
    this.#props = new RecentAnswer(now);
    this.#models = new RecentAnswer(now);
  }

  /** The windows found so far, by model (for `/readyz`), {@link MODELS_REMEMBERED} at most. */
  snapshot(): Record<string, number | null> {
    const windows: Record<string, number | null> = {};
    // Least recently used first, as the snapshot always listed them.
    this.#known.rforEach((window, model) => (windows[model] = window === UNKNOWN ? null : window));
    return windows;
  }

  /** How many models the snapshot holds. */
  get size(): number {
    return this.#known.size;
  }

  /** The window of `model`; `headers` go with the discovery calls (a client's credential for an upstream that wants one). */
  async get(model: string, headers?: CallHeaders): Promise<number | null> {
    const configured = this.#options.configured(model);
    if (configured !== 'auto') return configured;
    const window = (await this.#props.get(() => this.#fromProps(headers))) ?? windowOf(await this.#models.get(() => this.#fromModels(headers)), model);
    this.#known.set(model, window ?? UNKNOWN);
    if (window === null && !this.#warned.has(model)) {
      this.#warned.set(model, true);
      this.#options.onUnknown?.(model);
    }
    return window;
  }

  async #fromProps(headers: CallHeaders | undefined): Promise<number | null> {
    try {
      const reply = await this.#options.upstream.getJson('/props', undefined, headers);
      if (reply.status !== 200) return null;
      return positive(numberAt(reply.body, 'default_generation_settings', 'n_ctx'));
    } catch {
      return null;
    }
  }

  async #fromModels(headers: CallHeaders | undefined): Promise<readonly ListedModel[]> {
    try {
      const reply = await this.#options.upstream.getJson('/v1/models', undefined, headers);
      if (reply.status !== 200) return [];
      const data = (reply.body as { data?: unknown } | undefined)?.data;
      if (!Array.isArray(data)) return [];
      return data.map((entry: unknown) => ({
        id: (entry as { id?: unknown } | null)?.id,
        window: positive(numberAt(entry, 'meta', 'n_ctx')) ?? positive(numberAt(entry, 'meta', 'n_ctx_train')),
      }));
    } catch {
      return [];
    }
  }
}

/** The window of `model` in the upstream's list, else of its first model (llama-server serves one, whatever name is asked). */
function windowOf(listed: readonly ListedModel[], model: string): number | null {
  return (listed.find((entry) => entry.id === model) ?? listed[0])?.window ?? null;
}

function positive(value: number | undefined): number | null {
  return value !== undefined && value > 0 ? value : null;
}
