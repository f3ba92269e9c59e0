import { numberAt, type UpstreamJson } from './json-surface.js';

/**
 * Asking the upstream its context window per slot: llama-server's
 * `GET /props` (`default_generation_settings.n_ctx`, already per slot), else
 * `GET /v1/models` (`data[].meta.n_ctx`, then `n_ctx_train`). The lookups
 * only; what is kept of their answers, and for how long, is
 * compaction/context-window.ts's.
 */

/** Request headers for the lookups: a client's credential for an upstream that wants one. */
type CallHeaders = Readonly<Record<string, string>>;

/** A lookup that got no answer to keep: asked again next time. */
export class LookupFailed extends Error {}

/** What a failed discovery call says in the warning: the status or the error, never a body. */
function lookupFailure(path: string, reply: { status: number } | Error): LookupFailed {
  const wantsKey = !(reply instanceof Error) && (reply.status === 401 || reply.status === 403);
  const what = reply instanceof Error ? reply.message : `answered ${reply.status}${wantsKey ? ' (it wants a key: set upstream.api_key, or send one)' : ''}`;
  return new LookupFailed(`${path}: ${what}`);
}

/** Statuses that answer "is there a window here?" with "no": the server has no such route. */
const NOT_SERVED: ReadonlySet<number> = new Set([404, 405, 501]);

/** A `/v1/models` entry, as far as windows go. */
export interface ListedModel {
  readonly id: unknown;
  readonly window: number | null;
}

/** `/props`' window per slot; null when the server has no `/props` or reports none. Throws {@link LookupFailed}. */
export async function propsWindow(upstream: UpstreamJson, headers: CallHeaders | undefined): Promise<number | null> {
  const reply = await upstream.getJson('/props', undefined, headers).catch((error: unknown) => {
    throw lookupFailure('/props', error instanceof Error ? error : new Error(String(error)));
  });
  if (NOT_SERVED.has(reply.status)) return null;
  if (reply.status !== 200) throw lookupFailure('/props', reply);
  return positive(numberAt(reply.body, 'default_generation_settings', 'n_ctx'));
}

/** The models `/v1/models` lists with their windows; empty when the server lists none. Throws {@link LookupFailed}. */
export async function listedWindows(upstream: UpstreamJson, headers: CallHeaders | undefined): Promise<readonly ListedModel[]> {
  const reply = await upstream.getJson('/v1/models', undefined, headers).catch((error: unknown) => {
    throw lookupFailure('/v1/models', error instanceof Error ? error : new Error(String(error)));
  });
  if (NOT_SERVED.has(reply.status)) return [];
  if (reply.status !== 200) throw lookupFailure('/v1/models', reply);
  const data = (reply.body as { data?: unknown } | undefined)?.data;
  if (!Array.isArray(data)) return [];
  return data.map((entry: unknown) => ({
    id: (entry as { id?: unknown } | null)?.id,
    window: positive(numberAt(entry, 'meta', 'n_ctx')) ?? positive(numberAt(entry, 'meta', 'n_ctx_train')),
  }));
}

function positive(value: number | undefined): number | null {
  return value !== undefined && value > 0 ? value : null;
}
