import { LRUCache } from 'lru-cache';
import { MODELS_REMEMBERED, perModel } from './per-model.js';
import type { UpstreamJson } from '../../upstream/json-surface.js';
import { type NativeAnswers, nativeAnswers, type OllamaShow, ollamaShow } from '../../upstream/native-windows.js';
import { type FoundWindow, findWindow, type WindowAnswers } from '../../upstream/server-kind.js';
import { type ListedModel, LookupFailed, listedWindows, propsWindow, routerPropsWindow } from '../../upstream/window.js';
import type { CallHeaders } from '../ports.js';

/**
 * The context window the upstream serves per slot, per model: from the
 * configuration, else what the server found there documents
 * (upstream/server-kind.ts): llama-server's `GET /props`
 * (`default_generation_settings.n_ctx`, already per slot), else
 * `GET /v1/models` (llama-server's `meta.n_ctx`, vLLM's `max_model_len`, a
 * router's models), else Ollama's `/api/ps` and `/api/show`, LM Studio's
 * `/api/v0/models`.
 *
 * The upstream's two answers are kept, not one lookup per model: model
 * names come from requests, and each new one cost a `/props` call (and a
 * `/v1/models` one on a server without `/props`), so a client inventing
 * names made compactor ask the upstream once per request.
 *
 * Only answers are kept, never failures: a lookup that could not be made
 * (connection refused, a 401 from a server with `--api-key` to one client's
 * credential, a 5xx) was cached for a minute as "unknown", which switched
 * compaction off for every client. It is asked again on the next request,
 * with that request's credential.
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
  /** Told when a model's window is found, or found to have changed. */
  readonly onFound?: (model: string, window: number) => void;
  /** Told when a lookup failed, with why; at most once a minute for the same reason. */
  readonly onLookupFailed?: (model: string, reason: string) => void;
  /** `compaction.min_learned_window`: a refusal naming a smaller window is not learned. */
  readonly minLearnedWindow?: number;
  /** Told when a refusal's window is not learned, with why. */
  readonly onRefusalIgnored?: (model: string, window: number, reason: string) => void;
}

/** The floor of a learned window by default: below it no prompt of an agent fits anyway (its system prompt alone is larger). */
export const MIN_LEARNED_WINDOW = 512;

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

  /** Forgets the answer: the next `get` asks again. */
  forget(): void {
    this.#answer = undefined;
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
  readonly #native: RecentAnswer<NativeAnswers>;
  /** Answers about one model (Ollama's `/api/show`, a router's `/props?model`): asked only for models the server lists or knows. */
  readonly #ofModel = perModel<RecentAnswer<unknown>>();
  /** What was found for each model, with its kind and source (doctor, the log at start). */
  readonly #found = perModel<FoundWindow>();
  /** Windows the upstream's own refusals showed to be smaller than planned (`n_ctx` of `exceed_context_size_error`). */
  readonly #refused: LRUCache<string, number>;
  /** The last failure warned about, so a down upstream is not reported on every request. */
  #lastWarning: { readonly reason: string; readonly at: number } | undefined;
  readonly #now: () => number;

  constructor(options: ContextWindowsOptions) {
    this.#options = options;
    const now = options.now ?? Date.now;
    this.#now = now;
    // ttlResolution 0: the default caches the clock behind a timer an injected clock cannot move.
    this.#refused = new LRUCache({ max: MODELS_REMEMBERED, ttl: WINDOW_TTL_MS, ttlResolution: 0, perf: { now } });
    this.#props = new RecentAnswer(now);
    this.#models = new RecentAnswer(now);
    this.#native = new RecentAnswer(now);
  }

  /** The kind, window and source last found for `model`; undefined before it was asked. */
  found(model: string): FoundWindow | undefined {
    return this.#found.get(model);
  }

  /** The lookups for `findWindow`, each answer kept {@link WINDOW_TTL_MS}. */
  #answers(headers: CallHeaders | undefined): WindowAnswers {
    const upstream = this.#options.upstream;
    const ofModel = <T>(key: string, ask: () => Promise<T>): T | Promise<T> => {
      let answer = this.#ofModel.get(key);
      if (answer === undefined) this.#ofModel.set(key, (answer = new RecentAnswer<unknown>(this.#now)));
      return answer.get(ask) as T | Promise<T>;
    };
    return {
      props: () => this.#props.get(() => propsWindow(upstream, headers)),
      listed: () => this.#models.get(() => listedWindows(upstream, headers)),
      native: () => this.#native.get(() => nativeAnswers(upstream, headers)),
      ollamaShow: (model) => ofModel<OllamaShow | null>(`show ${model}`, () => ollamaShow(upstream, model, headers)),
      routerProps: (model) => ofModel<number | null>(`props ${model}`, () => routerPropsWindow(upstream, model, headers)),
    };
  }

  /** Forgets every answer: the next lookup asks the server again (a model loaded since, a server restarted). */
  #forgetAnswers(): void {
    this.#props.forget();
    this.#models.forget();
    this.#native.forget();
    this.#ofModel.clear();
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
    const refused = this.#refused.get(model) ?? null;
    const configured = this.#options.configured(model);
    if (configured !== 'auto') return refused === null ? configured : Math.min(refused, configured);
    let found: FoundWindow;
    try {
      found = await findWindow(model, this.#answers(headers));
    } catch (error) {
      if (!(error instanceof LookupFailed)) throw error;
      this.#warnFailure(model, error.message);
      return refused;
    }
    // A model loaded on first use (a router's, Ollama's) tells its window once loaded: asked again next time.
    if (!found.settled) this.#forgetAnswers();
    this.#found.set(model, found);
    let window = found.window;
    if (refused !== null) window = window === null ? refused : Math.min(window, refused);
    if (window !== null && this.#known.get(model) !== window) this.#options.onFound?.(model, window);
    this.#known.set(model, window ?? UNKNOWN);
    if (window === null && !this.#warned.has(model)) {
      this.#warned.set(model, true);
      this.#options.onUnknown?.(model);
    }
    return window;
  }

  /**
   * Takes the window the upstream itself reported when it refused a prompt
   * (llama-server's 400 `exceed_context_size_error` carries `n_ctx`): a
   * `context_window` configured too large, or a server restarted with a
   * smaller `-c`. It stands for a minute over what is configured or found,
   * then `/props` is trusted again. Never below `compaction.min_learned_window`,
   * nor below what `/props` reports when asked again now (the restarted server
   * reports its new `-c` there): a refusal naming 1 token made every request
   * of the model a 400. Says whether the window was learned.
   */
  async learnRefusal(model: string, window: number, headers?: CallHeaders): Promise<boolean> {
    const floor = this.#options.minLearnedWindow ?? MIN_LEARNED_WINDOW;
    const ignore = (reason: string): false => {
      this.#options.onRefusalIgnored?.(model, window, reason);
      return false;
    };
    if (!(window >= floor)) return ignore(`below compaction.min_learned_window (${floor})`);
    if (this.#options.configured(model) === 'auto') {
      // The server is asked again, whatever it is: a restarted one reports its new window.
      this.#forgetAnswers();
      const reported = await findWindow(model, this.#answers(headers)).catch(() => null);
      if (reported !== null && reported.window !== null && window < reported.window) return ignore(`below what ${reported.source} reports (${reported.window})`);
    }
    this.#refused.set(model, window);
    return true;
  }

  /** When the window learned from a refusal of `model` expires, or undefined when none stands. */
  learnedUntil(model: string): number | undefined {
    if (!this.#refused.has(model)) return undefined;
    return this.#now() + this.#refused.getRemainingTTL(model);
  }

  #warnFailure(model: string, reason: string): void {
    const last = this.#lastWarning;
    if (last !== undefined && last.reason === reason && this.#now() - last.at < WINDOW_TTL_MS) return;
    this.#lastWarning = { reason, at: this.#now() };
    this.#options.onLookupFailed?.(model, reason);
  }

}
