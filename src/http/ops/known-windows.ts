import type { Config } from '../../config/schema.js';

/**
 * The context window per model, for `/readyz`: those configured, and those
 * found so far. Before any chat request has asked, the upstream's first
 * listed model is looked up, so a fresh compactor shows the window it will
 * work with.
 */

/** What of the compaction engine this reads: its context windows. */
export interface WindowSource {
  readonly windows: {
    snapshot(): Record<string, number | null>;
    get(model: string): Promise<number | null>;
  };
}

export interface ModelList {
  getJson(path: string): Promise<{ readonly status: number; readonly body: unknown }>;
}

export async function knownWindows(engine: WindowSource, upstream: ModelList, config: Config): Promise<Record<string, number | null>> {
  const windows: Record<string, number | null> = engine.windows.snapshot();
  if (Object.keys(windows).length === 0) {
    try {
      const reply = await upstream.getJson('/v1/models');
      const data = (reply.body as { data?: unknown } | undefined)?.data;
      const id = Array.isArray(data) ? (data[0] as { id?: unknown } | undefined)?.id : undefined;
      if (reply.status === 200 && typeof id === 'string') windows[id] = await engine.windows.get(id);
    } catch {
      // Readiness is the upstream's /health; the windows are information.
    }
  }
  for (const [model, settings] of Object.entries(config.models)) if (settings.context_window !== 'auto') windows[model] = settings.context_window;
  return windows;
}
