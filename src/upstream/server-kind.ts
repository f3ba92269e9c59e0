import { type LmStudioModel, type NativeAnswers, type OllamaAnswers, type OllamaShow, ollamaName } from './native-windows.js';
import type { ListedModel } from './window.js';

/**
 * Which server compactor is in front of, and the window it runs a model
 * with, from what that server documents; what it *runs with* is taken over
 * what the model could (a model trained for 128k served with 4k is a 4k
 * window). The answers come from the lookups (window.ts,
 * native-windows.ts); whoever asks decides how long they are kept.
 */

export type ServerKind = 'llama-server' | 'llama-server router' | 'Ollama' | 'vLLM' | 'LM Studio' | 'OpenAI-compatible';

export interface FoundWindow {
  readonly kind: ServerKind;
  /** Tokens per slot (a request's prompt and answer); null when the server does not tell. */
  readonly window: number | null;
  /** Where it comes from, in the server's own words: `/api/ps context_length`. */
  readonly source: string;
  /**
   * False when the answer changes once the model is loaded (a router's model,
   * or Ollama's, loaded on first use): asked again on the next request rather
   * than kept.
   */
  readonly settled: boolean;
}

/**
 * Servers that cut a prompt longer than their window without an error:
 * Ollama's OpenAI endpoint keeps the end of the prompt within `num_ctx` and
 * answers 200 (docs/context-length.mdx; ollama/ollama#17944, #7987).
 */
export const TRUNCATES_SILENTLY: ReadonlySet<ServerKind> = new Set(['Ollama']);

/**
 * The context Ollama loads a model with when neither the Modelfile nor the
 * request sets `num_ctx`: 4k below 24 GiB of VRAM (docs/context-length.mdx),
 * or `OLLAMA_CONTEXT_LENGTH`, which compactor cannot see; the smallest is
 * planned with until `/api/ps` tells the loaded runner's.
 */
export const OLLAMA_DEFAULT_CONTEXT = 4096;

/** What the window is found from; each asked at most once per {@link findWindow}, and only when the ones before did not tell. */
export interface WindowAnswers {
  props(): Promise<number | null> | number | null;
  listed(): Promise<readonly ListedModel[]> | readonly ListedModel[];
  native(): Promise<NativeAnswers> | NativeAnswers;
  ollamaShow(model: string): Promise<OllamaShow | null> | OllamaShow | null;
  routerProps(model: string): Promise<number | null> | number | null;
}

/**
 * The window `model` runs with, and which server says so.
 *
 * @example
 * await findWindow('qwen3:14b', ollamaAnswers) // → { kind: 'Ollama', window: 4096, source: '/api/ps context_length', settled: true }
 */
export async function findWindow(model: string, answers: WindowAnswers): Promise<FoundWindow> {
  const props = await answers.props();
  if (props !== null) return { kind: 'llama-server', window: props, source: '/props', settled: true };
  const listed = await answers.listed();
  if (listed.some((entry) => entry.routerState !== undefined)) return routerWindow(model, listed, answers);
  // One model behind llama-server or vLLM, whatever name a client asks for: the first listed when none has the name.
  const entry = listed.find((candidate) => candidate.id === model) ?? listed[0];
  if (entry?.maxModelLen != null) return { kind: 'vLLM', window: entry.maxModelLen, source: '/v1/models max_model_len', settled: true };
  if (entry?.window != null) return { kind: 'llama-server', window: entry.window, source: '/v1/models meta.n_ctx', settled: true };
  const native = await answers.native();
  if (native.ollama !== null) return ollamaWindow(model, native.ollama, answers);
  if (native.lmStudio !== null) return lmStudioWindow(model, native.lmStudio);
  return { kind: 'OpenAI-compatible', window: null, source: 'not reported', settled: true };
}

/** Router mode: the loaded model's own `/props`, else the size its arguments start it with; a model not loaded yet is asked again. */
async function routerWindow(model: string, listed: readonly ListedModel[], answers: WindowAnswers): Promise<FoundWindow> {
  const entry = listed.find((candidate) => candidate.id === model);
  if (entry === undefined) return { kind: 'llama-server router', window: null, source: 'not one of its models (/models)', settled: true };
  const loaded = entry.routerState === 'loaded' || entry.routerState === 'sleeping';
  const own = loaded ? await answers.routerProps(model) : null;
  if (own !== null) return { kind: 'llama-server router', window: own, source: '/props?model', settled: true };
  if (entry.argsWindow !== null) return { kind: 'llama-server router', window: entry.argsWindow, source: '/models status.args', settled: loaded };
  return { kind: 'llama-server router', window: null, source: `not loaded yet (${entry.routerState ?? 'unknown'}): loaded on first use`, settled: false };
}

/** Ollama: the loaded runner's `context_length`, else the `num_ctx` it will load with, else its default; never above what the model could. */
async function ollamaWindow(model: string, ollama: OllamaAnswers, answers: WindowAnswers): Promise<FoundWindow> {
  const runner = ollama.running.find((candidate) => ollamaName(candidate.model) === ollamaName(model));
  if (runner?.contextLength != null) return { kind: 'Ollama', window: runner.contextLength, source: '/api/ps context_length', settled: true };
  const show = await answers.ollamaShow(model);
  if (show === null) return { kind: 'Ollama', window: null, source: 'not one of its models (/api/show)', settled: true };
  const cap = (tokens: number): number => (show.trained === null ? tokens : Math.min(tokens, show.trained));
  if (show.numCtx !== null) return { kind: 'Ollama', window: cap(show.numCtx), source: '/api/show parameters num_ctx (not loaded yet)', settled: false };
  return { kind: 'Ollama', window: cap(OLLAMA_DEFAULT_CONTEXT), source: `Ollama's default context (not loaded yet; the model could ${show.trained ?? 'unknown'})`, settled: false };
}

/** LM Studio: the loaded instance's `loaded_context_length`, else what the model could (a refusal then says what it loaded with). */
function lmStudioWindow(model: string, models: readonly LmStudioModel[]): FoundWindow {
  const entry = models.find((candidate) => candidate.id === model) ?? (models.length === 1 ? models[0] : undefined);
  if (entry === undefined) return { kind: 'LM Studio', window: null, source: 'not one of its models (/api/v0/models)', settled: true };
  if (entry.loaded && entry.loadedContextLength !== null) return { kind: 'LM Studio', window: entry.loadedContextLength, source: '/api/v0/models loaded_context_length', settled: true };
  // Loaded by a version that does not report loaded_context_length: what it could is all it says, and asking again would not tell more.
  return { kind: 'LM Studio', window: entry.maxContextLength, source: `/api/v0/models max_context_length${entry.loaded ? '' : ' (not loaded yet)'}`, settled: entry.loaded };
}
