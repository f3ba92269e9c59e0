import { type Config, modelSettingsOf } from '../config/schema.js';
import { upstreamJsonOf } from '../upstream/json-surface.js';
import { UpstreamClient } from '../upstream/client.js';
import { inspectUpstream, type ServedModel } from '../upstream/inspect.js';
import type { DoctorContext, PlannedModel, StoreAnswer } from './check.js';
import { probeStore } from './store-probe.js';

/**
 * The doctor's questions to the upstream and the store, each asked once and
 * shared by the checks that need its answer. The client is built as the
 * proxy builds its own (same URL, key and connect timeout), so what the
 * doctor reaches is what the proxy would.
 */

/** A call that has not answered by then is reported as such; a loaded llama-server answers these in milliseconds. */
const CALL_TIMEOUT_MS = 5_000;
/** The tiny chat request: a CPU-only model may take a while for its first token. */
const CHAT_TIMEOUT_MS = 60_000;

export interface UpstreamDoctorContext extends DoctorContext {
  close(): Promise<void>;
}

/** The window compactor plans with for a model: the configured one, else what the upstream said. */
export function plannedModel(config: Config, served: ServedModel): PlannedModel {
  const { id, window: reported, source: reportedSource } = served;
  // The key that sets the window, as modelSettingsOf reads it: the model's own entry, else "*".
  const key = Object.hasOwn(config.models, id) ? id : '*';
  const configured = modelSettingsOf(config.models, id).context_window;
  const seen = { reported, reportedSource };
  if (configured !== 'auto') return { id, window: configured, source: 'configured', ...seen, configuredKey: `models."${key}".context_window` };
  return { id, window: reported, source: reported === null ? 'unknown' : 'upstream', ...seen, configuredKey: null };
}

function once<T>(ask: () => Promise<T>): () => Promise<T> {
  let answer: Promise<T> | undefined;
  return () => (answer ??= ask());
}

export function doctorContext(config: Config, file: string | null, options: { now?: () => number } = {}): UpstreamDoctorContext {
  const upstream = new UpstreamClient({
    url: config.upstream.url,
    apiKey: config.upstream.api_key,
    timeouts: { connectMs: Math.min(config.upstream.timeouts.connect_ms, CALL_TIMEOUT_MS), headersMs: CHAT_TIMEOUT_MS, idleMs: CHAT_TIMEOUT_MS },
  });
  const json = upstreamJsonOf(upstream, CALL_TIMEOUT_MS);
  const inspection = once(() => inspectUpstream(upstream));
  const models = once(async (): Promise<readonly PlannedModel[]> => {
    const found = await inspection();
    return found.state === 'ready' ? found.models.map((model) => plannedModel(config, model)) : [];
  });
  const store = once((): Promise<StoreAnswer> => probeStore(config));
  return {
    config,
    file,
    inspection,
    models,
    store,
    now: options.now ?? (() => performance.now()),
    async get(path) {
      try {
        return await json.getJson(path);
      } catch {
        return { status: 0, body: undefined };
      }
    },
    async post(path, body) {
      try {
        return await json.postJson(path, body);
      } catch {
        // No answer at all (refused, timed out): as a server that does not serve the path would say.
        return { status: 0, body: undefined };
      }
    },
    async chat(body) {
      try {
        return { ok: true, body: await upstream.complete({ ...body }, { timeoutMs: CHAT_TIMEOUT_MS }) };
      } catch (error) {
        return { ok: false, error: error instanceof Error ? error.message : String(error) };
      }
    },
    close: () => upstream.close({ graceMs: 0 }),
  };
}
