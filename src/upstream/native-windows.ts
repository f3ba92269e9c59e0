import { numberAt } from './json-surface.js';
import type { UpstreamJson } from './json-surface.js';
import { type CallHeaders, lookup, lookupFailure, NOT_SERVED, positive } from './window.js';

/**
 * The windows Ollama and LM Studio tell through their own APIs, beside the
 * OpenAI-compatible one (whose `/v1/models` names no window on either):
 *
 * - Ollama (docs/api.md, docs.ollama.com/api): `GET /api/version` →
 *   `{"version": "0.5.1"}` says it is Ollama; `GET /api/ps` lists the loaded
 *   runners, each with the `context_length` it runs with; `POST /api/show
 *   {"model"}` gives the Modelfile's `parameters` (`num_ctx 4096` on a line)
 *   and `model_info["<arch>.context_length"]`, what the model could.
 * - LM Studio (lmstudio-ai/docs 1_developer/2_rest/endpoints.mdx): `GET
 *   /api/v0/models` lists each model with its `state` (`loaded` |
 *   `not-loaded`), `max_context_length` (what it could) and, loaded,
 *   `loaded_context_length` (what it runs with).
 */

export interface OllamaRunner {
  /** `model` (or `name`) of the `/api/ps` entry: `qwen3:14b`. */
  readonly model: string;
  readonly contextLength: number | null;
}

export interface OllamaAnswers {
  readonly version: string;
  readonly running: readonly OllamaRunner[];
}

export interface LmStudioModel {
  readonly id: string;
  readonly loaded: boolean;
  readonly loadedContextLength: number | null;
  readonly maxContextLength: number | null;
}

/** What the native routes said: each null when the server is not that one. */
export interface NativeAnswers {
  readonly ollama: OllamaAnswers | null;
  readonly lmStudio: readonly LmStudioModel[] | null;
}

/** Ollama's `/api/show` of one model: the `num_ctx` it is configured with, and what the model was trained for. */
export interface OllamaShow {
  readonly numCtx: number | null;
  readonly trained: number | null;
}

function entries(body: unknown, key: string): unknown[] {
  const list = (body as Record<string, unknown> | null | undefined)?.[key];
  return Array.isArray(list) ? list : [];
}

/**
 * A probe of a route that only one kind of server has: another server's
 * error for it (a gateway's 500 for a path it does not know) says "not that
 * one", not "the lookup failed"; only a refused credential is a failure.
 */
async function probe(upstream: UpstreamJson, path: string, headers: CallHeaders | undefined): Promise<unknown> {
  const reply = await upstream.getJson(path, undefined, headers).catch(() => null);
  if (reply === null || reply.status !== 200) {
    if (reply !== null && (reply.status === 401 || reply.status === 403)) throw lookupFailure(path, reply);
    return null;
  }
  return reply.body;
}

/** Asks `/api/version` (and, on Ollama, `/api/ps`), then `/api/v0/models`; a route not served is null. Throws LookupFailed. */
export async function nativeAnswers(upstream: UpstreamJson, headers: CallHeaders | undefined): Promise<NativeAnswers> {
  const version = (await probe(upstream, '/api/version', headers)) as { version?: unknown } | null;
  if (typeof version?.version === 'string') {
    const ps = await lookup(upstream, '/api/ps', headers);
    const running = entries(ps, 'models').flatMap((entry): OllamaRunner[] => {
      const { model, name } = (entry ?? {}) as { model?: unknown; name?: unknown };
      const id = typeof model === 'string' ? model : typeof name === 'string' ? name : undefined;
      return id === undefined ? [] : [{ model: id, contextLength: positive(numberAt(entry, 'context_length')) }];
    });
    return { ollama: { version: version.version, running }, lmStudio: null };
  }
  const listed = await probe(upstream, '/api/v0/models', headers);
  if (listed === null || !Array.isArray((listed as { data?: unknown }).data)) return { ollama: null, lmStudio: null };
  const lmStudio = entries(listed, 'data').flatMap((entry): LmStudioModel[] => {
    const { id, state } = (entry ?? {}) as { id?: unknown; state?: unknown };
    if (typeof id !== 'string') return [];
    return [{ id, loaded: state === 'loaded', loadedContextLength: positive(numberAt(entry, 'loaded_context_length')), maxContextLength: positive(numberAt(entry, 'max_context_length')) }];
  });
  return { ollama: null, lmStudio };
}

/** `num_ctx` as the `parameters` text of `/api/show` writes it: one `name value` per line. */
function numCtxOf(parameters: unknown): number | null {
  if (typeof parameters !== 'string') return null;
  const match = /^num_ctx\s+(\d+)\s*$/m.exec(parameters);
  return match === null ? null : positive(Number(match[1]));
}

/** Ollama's `/api/show` of `model`; null when it has no such model. Throws LookupFailed. */
export async function ollamaShow(upstream: UpstreamJson, model: string, headers: CallHeaders | undefined): Promise<OllamaShow | null> {
  const reply = await upstream.postJson('/api/show', { model }, undefined, headers).catch((error: unknown) => {
    throw lookupFailure('/api/show', error instanceof Error ? error : new Error(String(error)));
  });
  if (NOT_SERVED.has(reply.status)) return null;
  if (reply.status !== 200) throw lookupFailure('/api/show', reply);
  const info = (reply.body as { model_info?: Record<string, unknown> } | undefined)?.model_info;
  const architecture = info?.['general.architecture'];
  const trained = typeof architecture === 'string' ? positive(numberAt(info, `${architecture}.context_length`)) : null;
  return { numCtx: numCtxOf((reply.body as { parameters?: unknown } | undefined)?.parameters), trained };
}

/** Ollama names `qwen3` and `qwen3:latest` alike: a name without a tag is its `latest`. */
export function ollamaName(model: string): string {
  return model.includes(':') ? model : `${model}:latest`;
}
