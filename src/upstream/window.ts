import { numberAt, type UpstreamJson } from './json-surface.js';

/**
 * Asking the upstream its context window per slot through the routes every
 * llama.cpp-like server has: llama-server's `GET /props`
 * (`default_generation_settings.n_ctx`, already per slot), else
 * `GET /v1/models`, whose entries carry llama-server's `meta.n_ctx` (then
 * `n_ctx_train`), vLLM's `max_model_len`
 * (`ModelCard`, vllm/entrypoints/openai/protocol.py), or, in llama-server's
 * router mode, each model's `status` (`value` loaded | loading | unloaded |
 * sleeping, and the `args` it runs with: tools/server/README.md § Using
 * multiple models). The lookups only; what is kept of their answers, and for
 * how long, is compaction/sizes/context-window.ts's; Ollama's and LM Studio's own
 * routes are native-windows.ts's.
 */

/** Request headers for the lookups: a client's credential for an upstream that wants one. */
export type CallHeaders = Readonly<Record<string, string>>;

/** A lookup that got no answer to keep: asked again next time. */
export class LookupFailed extends Error {}

/** What a failed discovery call says in the warning: the status or the error, never a body. */
export function lookupFailure(path: string, reply: { status: number } | Error): LookupFailed {
  const wantsKey = !(reply instanceof Error) && (reply.status === 401 || reply.status === 403);
  const what = reply instanceof Error ? reply.message : `answered ${reply.status}${wantsKey ? ' (it wants a key: set upstream.api_key, or send one)' : ''}`;
  return new LookupFailed(`${path}: ${what}`);
}

/**
 * Statuses that answer "is there a window here?" with "no": the server has no
 * such route (and llama-server's router answers a `/props` naming no model
 * with a 400).
 */
export const NOT_SERVED: ReadonlySet<number> = new Set([400, 404, 405, 501]);

/** A `/v1/models` entry, as far as windows go. */
export interface ListedModel {
  readonly id: unknown;
  /** llama-server's `meta.n_ctx`, else `n_ctx_train`. */
  readonly window: number | null;
  /** vLLM's `max_model_len`: the whole window of a request, prompt and answer. */
  readonly maxModelLen: number | null;
  /** llama-server's router mode: the model's `status.value`; undefined for a server that is no router. */
  readonly routerState: string | undefined;
  /** Router mode: the window per slot its `status.args` give (`-c` over `-np`), null when they do not say. */
  readonly argsWindow: number | null;
}

/** A GET whose failure is a {@link LookupFailed}; null for a route the server does not serve. */
export async function lookup(upstream: UpstreamJson, path: string, headers: CallHeaders | undefined): Promise<unknown> {
  const reply = await upstream.getJson(path, undefined, headers).catch((error: unknown) => {
    throw lookupFailure(path, error instanceof Error ? error : new Error(String(error)));
  });
  if (NOT_SERVED.has(reply.status)) return null;
  if (reply.status !== 200) throw lookupFailure(path, reply);
  return reply.body;
}

/** `/props`' window per slot; null when the server has no `/props` or reports none. Throws {@link LookupFailed}. */
export async function propsWindow(upstream: UpstreamJson, headers: CallHeaders | undefined): Promise<number | null> {
  return positive(numberAt(await lookup(upstream, '/props', headers), 'default_generation_settings', 'n_ctx'));
}

/**
 * A router's model's window per slot, from its own `/props`; `autoload=false`
 * so that asking never loads a model (tools/server/README.md § Routing
 * requests). Null when it is not loaded or does not say.
 */
export async function routerPropsWindow(upstream: UpstreamJson, model: string, headers: CallHeaders | undefined): Promise<number | null> {
  const body = await lookup(upstream, `/props?model=${encodeURIComponent(model)}&autoload=false`, headers);
  return positive(numberAt(body, 'default_generation_settings', 'n_ctx'));
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
  return data.map((entry: unknown) => {
    const status = (entry as { status?: { value?: unknown; args?: unknown } } | null)?.status;
    return {
      id: (entry as { id?: unknown } | null)?.id,
      window: positive(numberAt(entry, 'meta', 'n_ctx')) ?? positive(numberAt(entry, 'meta', 'n_ctx_train')),
      maxModelLen: positive(numberAt(entry, 'max_model_len')),
      routerState: typeof status?.value === 'string' ? status.value : undefined,
      argsWindow: argsWindow(status?.args),
    };
  });
}

/** The flags llama-server reads its context size and its slots from (`-c`, `--ctx-size`; `-np`, `--parallel`). */
const CONTEXT_FLAGS: ReadonlySet<string> = new Set(['-c', '-ctx', '--ctx-size']);
const SLOT_FLAGS: ReadonlySet<string> = new Set(['-np', '--parallel']);

/**
 * The window per slot a router's model instance is started with: its
 * context size shared by its slots (README: `"args": ["llama-server", "-ctx",
 * "4096"]`). Null when the arguments do not name a size (0 is "the model's").
 *
 * @example
 * argsWindow(['llama-server', '--ctx-size', '16384', '-np', '2']) // → 8192
 */
export function argsWindow(args: unknown): number | null {
  if (!Array.isArray(args)) return null;
  const after = (flags: ReadonlySet<string>): number | null => {
    const at = args.findIndex((arg) => typeof arg === 'string' && flags.has(arg));
    const value = at < 0 ? undefined : args[at + 1];
    return typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : null;
  };
  const size = after(CONTEXT_FLAGS);
  if (size === null || size === 0) return null;
  return Math.floor(size / Math.max(1, after(SLOT_FLAGS) ?? 1));
}

export function positive(value: number | undefined): number | null {
  return value !== undefined && value > 0 ? value : null;
}
