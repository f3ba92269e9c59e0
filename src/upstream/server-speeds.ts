import type { Timings, Usage } from './usage.js';

/**
 * What the upstream's answers say of its speed: per upstream and model (no
 * tenant: one server reads every tenant's prompts at the same speed), how
 * many prompt tokens a second it reads (prefill) and how many it writes
 * (decode), and how many tokens a summary of it writes. Learned from
 * llama-server's `timings` (`prompt_n` / `prompt_ms`, `predicted_n` /
 * `predicted_ms`); from a server that sends none, from `usage` and the wall
 * time of a streamed answer (time to its first byte for prefill, the rest
 * for decode: rougher, since a server may send its headers before it has
 * read the prompt). No I/O, no clock: the caller hands in what it measured.
 *
 * Smoothed by decaying sums of tokens and milliseconds
 * ({@link SPEED_DECAY}): a speed is tokens over time, so a one-token prefill
 * (mostly overhead: 823 t/s in a recorded answer whose long prompt read at
 * 25,075 t/s) weighs one token's worth, not one answer's.
 */

/**
 * How much of the past each new answer keeps: after ~10 answers an old speed
 * weighs a third. A server's speed moves with its load and its prompt
 * length (attention grows with the context); ten answers follow that within
 * a conversation's few turns, and one odd answer moves it little.
 */
export const SPEED_DECAY = 0.9;
/** Keys kept (upstream × model): more than one proxy serves; the one unseen longest goes first. */
export const MAX_SPEED_KEYS = 64;

/** What one answer measured: tokens read and written, and the time each took when known. */
export interface AnswerMeasure {
  /** Prompt tokens read anew (not from the cache). */
  readonly prefillTokens: number;
  readonly prefillMs: number | null;
  readonly decodeTokens: number;
  readonly decodeMs: number | null;
  /** Prompt tokens the server says it reused from its cache (`cache_n`, `cached_tokens`), or null when it said nothing. */
  readonly cachedTokens: number | null;
  /** Where the times come from: the server's own `timings`, or the wall clock. */
  readonly source: 'timings' | 'wall';
}

/** An answer's wall times, from the relay: to its first byte, and from there to its last. */
export interface WallTimes {
  readonly firstByteMs: number;
  readonly restMs: number;
}

/** Tokens a second, when learned. */
export interface Speeds {
  readonly prefill: number;
  readonly decode: number;
}

export interface LearnedSpeed {
  readonly upstream: string;
  readonly model: string;
  readonly prefill: number | null;
  readonly decode: number | null;
  /** Tokens a summary writes, smoothed as the speeds are; null before the first summary. */
  readonly summaryTokens: number | null;
  readonly answers: number;
}

/** Server seconds one answer took: what it spent reading the prompt, and writing the answer. */
export interface ServerSeconds {
  readonly prefill: number;
  readonly decode: number;
}

/**
 * What an answer measured, from its `usage` and `timings` (and its wall
 * times when it has no timings); null when it says nothing of its tokens.
 *
 * @example
 * measureOf({ timings: { cache_n: 1656, prompt_n: 11, prompt_ms: 22.017, predicted_n: 4, predicted_ms: 5.138 } })
 * // → { prefillTokens: 11, prefillMs: 22.017, decodeTokens: 4, decodeMs: 5.138, cachedTokens: 1656, source: 'timings' }
 */
export function measureOf(found: { readonly usage?: Usage | undefined; readonly timings?: Timings | undefined }, wall?: WallTimes): AnswerMeasure | null {
  const { usage, timings } = found;
  if (timings?.prompt_n !== undefined || timings?.predicted_n !== undefined) {
    return {
      prefillTokens: timings.prompt_n ?? 0,
      prefillMs: timings.prompt_ms ?? null,
      decodeTokens: timings.predicted_n ?? usage?.completion_tokens ?? 0,
      decodeMs: timings.predicted_ms ?? null,
      cachedTokens: timings.cache_n ?? usage?.prompt_tokens_details?.cached_tokens ?? null,
      source: 'timings',
    };
  }
  if (usage === undefined) return null;
  const cached = usage.prompt_tokens_details?.cached_tokens ?? null;
  return {
    prefillTokens: Math.max(0, usage.prompt_tokens - (cached ?? 0)),
    prefillMs: wall?.firstByteMs ?? null,
    decodeTokens: usage.completion_tokens ?? 0,
    decodeMs: wall?.restMs ?? null,
    cachedTokens: cached,
    source: 'wall',
  };
}

interface Sums {
  prefillTokens: number;
  prefillMs: number;
  decodeTokens: number;
  decodeMs: number;
  summaryTokens: number;
  summaries: number;
  answers: number;
}

// Below this a sum is noise (a first one-token answer); a speed is reported from a few tokens' worth on.
const MIN_TOKENS = 4;

function speedOfSums(tokens: number, ms: number): number | null {
  return tokens >= MIN_TOKENS && ms > 0 ? (tokens * 1000) / ms : null;
}

/** The speeds learned per upstream and model; bounded to {@link MAX_SPEED_KEYS}. */
export class ServerSpeeds {
  // Insertion order is recency: a key seen again is deleted and set anew.
  readonly #sums = new Map<string, Sums>();

  /** One answer's measure (a summary's too, with `summary`: it also teaches how long a summary is). */
  observe(upstream: string, model: string, measure: AnswerMeasure, options: { readonly summary?: boolean } = {}): void {
    const key = `${upstream}\n${model}`;
    const sums = this.#sums.get(key) ?? { prefillTokens: 0, prefillMs: 0, decodeTokens: 0, decodeMs: 0, summaryTokens: 0, summaries: 0, answers: 0 };
    this.#sums.delete(key);
    this.#sums.set(key, sums);
    if (this.#sums.size > MAX_SPEED_KEYS) this.#sums.delete(this.#sums.keys().next().value!);
    sums.answers++;
    if (measure.prefillMs !== null && measure.prefillMs > 0) {
      sums.prefillTokens = sums.prefillTokens * SPEED_DECAY + measure.prefillTokens;
      sums.prefillMs = sums.prefillMs * SPEED_DECAY + measure.prefillMs;
    }
    if (measure.decodeMs !== null && measure.decodeMs > 0) {
      sums.decodeTokens = sums.decodeTokens * SPEED_DECAY + measure.decodeTokens;
      sums.decodeMs = sums.decodeMs * SPEED_DECAY + measure.decodeMs;
    }
    if (options.summary === true && measure.decodeTokens > 0) {
      sums.summaryTokens = sums.summaryTokens * SPEED_DECAY + measure.decodeTokens;
      sums.summaries = sums.summaries * SPEED_DECAY + 1;
    }
  }

  /** Both speeds of a model on an upstream, or null until both are learned (the reader w33's slots and the cost rules use). */
  speedsOf(upstream: string, model: string): Speeds | null {
    const sums = this.#sums.get(`${upstream}\n${model}`);
    if (sums === undefined) return null;
    const prefill = speedOfSums(sums.prefillTokens, sums.prefillMs);
    const decode = speedOfSums(sums.decodeTokens, sums.decodeMs);
    return prefill === null || decode === null ? null : { prefill, decode };
  }

  /** The tokens a summary of this model writes, smoothed; null before the first. */
  summaryTokensOf(upstream: string, model: string): number | null {
    const sums = this.#sums.get(`${upstream}\n${model}`);
    return sums === undefined || sums.summaries === 0 ? null : sums.summaryTokens / sums.summaries;
  }

  /**
   * The server seconds of one answer: its own timings when it has them, else
   * its tokens at the learned speeds, else its wall times; 0 for a part
   * nothing says anything of.
   */
  secondsOf(upstream: string, model: string, measure: AnswerMeasure): ServerSeconds {
    const speeds = this.#sums.get(`${upstream}\n${model}`);
    const prefillSpeed = speeds === undefined ? null : speedOfSums(speeds.prefillTokens, speeds.prefillMs);
    const decodeSpeed = speeds === undefined ? null : speedOfSums(speeds.decodeTokens, speeds.decodeMs);
    const part = (ms: number | null, tokens: number, speed: number | null): number =>
      measure.source === 'timings' && ms !== null ? ms / 1000 : speed !== null ? tokens / speed : ms !== null ? ms / 1000 : 0;
    return { prefill: part(measure.prefillMs, measure.prefillTokens, prefillSpeed), decode: part(measure.decodeMs, measure.decodeTokens, decodeSpeed) };
  }

  /** Every key's speeds, for `/metrics`, the dashboard and `doctor`. */
  snapshot(): LearnedSpeed[] {
    return [...this.#sums].map(([key, sums]) => {
      const [upstream = '', model = ''] = key.split('\n');
      return {
        upstream,
        model,
        prefill: speedOfSums(sums.prefillTokens, sums.prefillMs),
        decode: speedOfSums(sums.decodeTokens, sums.decodeMs),
        summaryTokens: sums.summaries === 0 ? null : sums.summaryTokens / sums.summaries,
        answers: sums.answers,
      };
    });
  }
}
