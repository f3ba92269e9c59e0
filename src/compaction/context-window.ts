import { type CallHeaders, numberAt, type UpstreamJson } from './upstream-json.js';

/**
 * The context window the upstream serves per slot, per model: from the
 * configuration, else llama-server's `GET /props`
 * (`default_generation_settings.n_ctx`, already per slot), else
 * `GET /v1/models` (`data[].meta.n_ctx`, then `n_ctx_train`).
 */

/** How long a discovered window is trusted: a restarted llama-server may come back with another `-c`. */
const WINDOW_TTL_MS = 60_000;

export interface ContextWindowsOptions {
  /** The configured window of a model: a number of tokens, or 'auto' to ask the upstream. */
  readonly configured: (model: string) => number | 'auto';
  readonly upstream: UpstreamJson;
  readonly now?: () => number;
  /** Told once per model when no window can be found (only `max_messages` can trigger then). */
  readonly onUnknown?: (model: string) => void;
}

interface Known {
  readonly window: number | null;
  readonly at: number;
}

export class ContextWindows {
  readonly #options: ContextWindowsOptions;
  readonly #now: () => number;
  readonly #known = new Map<string, Known>();
  readonly #asking = new Map<string, Promise<number | null>>();
  readonly #warned = new Set<string>();

  constructor(options: ContextWindowsOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  /** The windows found so far, by model (for `/readyz`). */
  snapshot(): Record<string, number | null> {
    return Object.fromEntries([...this.#known].map(([model, known]) => [model, known.window]));
  }

  /** The window of `model`; `headers` go with the discovery calls (a client's credential for an upstream that wants one). */
  async get(model: string, headers?: CallHeaders): Promise<number | null> {
    const configured = this.#options.configured(model);
    if (configured !== 'auto') return configured;
    const known = this.#known.get(model);
    if (known !== undefined && this.#now() - known.at < WINDOW_TTL_MS) return known.window;
    const asking = this.#asking.get(model);
    if (asking !== undefined) return asking;
    const promise = this.#discover(model, headers).finally(() => this.#asking.delete(model));
    this.#asking.set(model, promise);
    return promise;
  }

  async #discover(model: string, headers: CallHeaders | undefined): Promise<number | null> {
    const window = (await this.#fromProps(headers)) ?? (await this.#fromModels(model, headers));
    this.#known.set(model, { window, at: this.#now() });
    if (window === null && !this.#warned.has(model)) {
      this.#warned.add(model);
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

  async #fromModels(model: string, headers: CallHeaders | undefined): Promise<number | null> {
    try {
      const reply = await this.#options.upstream.getJson('/v1/models', undefined, headers);
      if (reply.status !== 200) return null;
      const data = (reply.body as { data?: unknown } | undefined)?.data;
      if (!Array.isArray(data) || data.length === 0) return null;
      const entry = data.find((item: unknown) => (item as { id?: unknown } | null)?.id === model) ?? data[0];
      return positive(numberAt(entry, 'meta', 'n_ctx')) ?? positive(numberAt(entry, 'meta', 'n_ctx_train'));
    } catch {
      return null;
    }
  }
}

function positive(value: number | undefined): number | null {
  return value !== undefined && value > 0 ? value : null;
}
