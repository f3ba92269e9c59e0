import { UpstreamStatusError } from '../errors.js';
import type { UpstreamClient } from './client.js';

/**
 * What compactor finds when it first asks the upstream, once at start, so
 * the log says what it will work with (or why it cannot yet) instead of
 * claiming a readiness nobody checked: reachable or not, the models served
 * with their window per slot, the number of slots.
 */

export interface ServedModel {
  readonly id: string;
  /** Tokens per slot, as `/props` (llama-server) or `/v1/models` report it; null when neither says. */
  readonly window: number | null;
}

export type UpstreamInspection =
  | {
      readonly state: 'ready';
      readonly models: readonly ServedModel[];
      /** llama-server's `total_slots` (`-np`); null for servers that do not say. */
      readonly slots: number | null;
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
export async function inspectUpstream(upstream: UpstreamClient, options: { timeoutMs?: number } = {}): Promise<UpstreamInspection> {
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

  const props = await upstream.getJson('/props', { timeoutMs }).catch(() => undefined);
  const settings = (props as { default_generation_settings?: { n_ctx?: unknown }; total_slots?: unknown } | undefined) ?? {};
  const propsWindow = numberOrNull(settings.default_generation_settings?.n_ctx);
  const data = (models as { data?: unknown } | undefined)?.data;
  const served: ServedModel[] = [];
  if (Array.isArray(data)) {
    for (const entry of data as Array<{ id?: unknown; meta?: { n_ctx?: unknown; n_ctx_train?: unknown } } | null>) {
      if (typeof entry?.id !== 'string') continue;
      // /props holds the window per slot; /v1/models' n_ctx is the whole context of every slot.
      served.push({ id: entry.id, window: propsWindow ?? numberOrNull(entry.meta?.n_ctx) ?? numberOrNull(entry.meta?.n_ctx_train) });
    }
  }
  return { state: 'ready', models: served, slots: numberOrNull(settings.total_slots) };
}
