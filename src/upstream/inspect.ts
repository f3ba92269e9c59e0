import { UpstreamStatusError } from '../errors.js';
import type { Upstream } from './client.js';
import { type UpstreamJson, upstreamJsonOf } from './json-surface.js';
import { nativeAnswers, ollamaShow } from './native-windows.js';
import { findWindow, type ServerKind, TRUNCATES_SILENTLY, type WindowAnswers } from './server-kind.js';
import { type ListedModel, listedWindows, routerPropsWindow } from './window.js';

/**
 * What compactor finds when it first asks the upstream, once at start, so
 * the log says what it will work with (or why it cannot yet) instead of
 * claiming a readiness nobody checked: reachable or not, which server it is,
 * the models served with their window per slot and where each comes from,
 * the number of slots.
 */

export interface ServedModel {
  readonly id: string;
  /** Tokens per slot, as the server documents it (upstream/server-kind.ts); null when it does not say. */
  readonly window: number | null;
  /** Where the window comes from: `/props`, `/api/ps context_length` … */
  readonly source: string;
}

export type UpstreamInspection =
  | {
      readonly state: 'ready';
      readonly kind: ServerKind;
      readonly models: readonly ServedModel[];
      /** llama-server's `total_slots` (`-np`); null for servers that do not say. */
      readonly slots: number | null;
      /** The server cuts a prompt longer than its window without an error (Ollama). */
      readonly truncatesSilently: boolean;
    }
  /** It answers, but `/health` says not yet (503 while llama-server loads its model), or it wants a key. */
  | { readonly state: 'not ready'; readonly status: number; readonly reason: string }
  | { readonly state: 'unreachable'; readonly reason: string };

// At start a person waits for this line; a loaded llama-server answers in milliseconds.
const INSPECT_TIMEOUT_MS = 3_000;

function numberOrNull(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : null;
}

function whyNotReady(status: number): string {
  if (status === 401 || status === 403) return `it answers ${status}: it wants a key (set upstream.api_key, or clients' keys pass through)`;
  if (status === 503) return 'it answers 503: still loading its model';
  return `its health check answers ${status}`;
}

/**
 * Asks `/health`, `/props` and `/v1/models` once, never throwing.
 *
 * @example
 * await inspectUpstream(upstream)
 * // → { state: 'ready', models: [{ id: 'qwen', window: 32768 }], slots: 1 }
 */
export async function inspectUpstream(upstream: Upstream, options: { timeoutMs?: number } = {}): Promise<UpstreamInspection> {
  const { timeoutMs = INSPECT_TIMEOUT_MS } = options;
  let models: unknown;
  try {
    models = await upstream.getJson('/v1/models', { timeoutMs });
  } catch (error) {
    if (!(error instanceof UpstreamStatusError)) return { state: 'unreachable', reason: error instanceof Error ? error.message : String(error) };
    if (error.status === 401 || error.status === 403) return { state: 'not ready', status: error.status, reason: whyNotReady(error.status) };
    // A server without /v1/models still proxies chat; its /health says whether it is ready.
    models = undefined;
  }
  const health = await upstream.health({ timeoutMs });
  if (health.status === null) return { state: 'unreachable', reason: 'no answer to its health check' };
  if (!health.ready) return { state: 'not ready', status: health.status, reason: whyNotReady(health.status) };

  const json = upstreamJsonOf(upstream, timeoutMs);
  const reply = await json.getJson('/props').catch(() => undefined);
  const props = (reply?.status === 200 ? reply.body : undefined) as { total_slots?: unknown; default_generation_settings?: { n_ctx?: unknown } } | undefined;
  const data = (models as { data?: unknown } | undefined)?.data;
  const ids = Array.isArray(data) ? (data as Array<{ id?: unknown } | null>).flatMap((entry) => (typeof entry?.id === 'string' ? [entry.id] : [])) : [];
  const survey = await surveyWindows(json, numberOrNull(props?.default_generation_settings?.n_ctx), ids);
  return { state: 'ready', kind: survey.kind, models: survey.models, slots: numberOrNull(props?.total_slots), truncatesSilently: TRUNCATES_SILENTLY.has(survey.kind) };
}

/** Every listed model's window, each lookup asked once for all of them; a lookup that fails tells nothing (the start line says what it found). */
async function surveyWindows(json: UpstreamJson, propsWindow: number | null, ids: readonly string[]): Promise<{ kind: ServerKind; models: ServedModel[] }> {
  const once = <T>(ask: () => Promise<T>, otherwise: T): (() => Promise<T>) => {
    let answer: Promise<T> | undefined;
    return () => (answer ??= ask().catch(() => otherwise));
  };
  const answers: WindowAnswers = {
    props: () => propsWindow,
    listed: once((): Promise<readonly ListedModel[]> => listedWindows(json, undefined), []),
    native: once(() => nativeAnswers(json, undefined), { ollama: null, lmStudio: null }),
    ollamaShow: (model) => ollamaShow(json, model, undefined).catch(() => null),
    routerProps: (model) => routerPropsWindow(json, model, undefined).catch(() => null),
  };
  const served: ServedModel[] = [];
  // The kind does not depend on the model asked: the first one's (or, with none listed, no name's) says it.
  let kind: ServerKind | undefined;
  for (const id of ids) {
    const found = await findWindow(id, answers);
    kind ??= found.kind;
    served.push({ id, window: found.window, source: found.source });
  }
  return { kind: kind ?? (await findWindow('', answers)).kind, models: served };
}
