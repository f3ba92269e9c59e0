import { setMaxListeners } from 'node:events';
import { Pool } from 'undici';

/** One streaming request held open: where it goes and what it sends. */
export interface IdleStreamRequest {
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: string;
  /** Called with each answer's status (a bench may refuse anything but 200). */
  readonly onStatus?: (status: number) => void;
}

/**
 * Opens `count` streams the upstream keeps open and resolves once every one
 * has had its first event; `release()` aborts them and closes the pool. Shared
 * by the benches that read the proxy's memory with a thousand idle streams.
 */
export async function holdIdleStreams(origin: string, count: number, request: IdleStreamRequest): Promise<{ release(): Promise<void> }> {
  const pool = new Pool(origin, { connections: count, headersTimeout: 0, bodyTimeout: 0 });
  const controller = new AbortController();
  setMaxListeners(count + 10, controller.signal);
  const opened: Array<Promise<void>> = [];
  const first: Array<Promise<void>> = [];
  const BATCH = 100;
  for (let index = 0; index < count; index++) {
    let markFirst!: () => void;
    first.push(new Promise<void>((resolve) => (markFirst = resolve)));
    opened.push(
      (async () => {
        const response = await pool.request({ method: 'POST', path: request.path, headers: request.headers, body: request.body, signal: controller.signal });
        request.onStatus?.(response.statusCode);
        response.body.on('error', () => undefined);
        response.body.once('data', () => markFirst());
        response.body.resume();
      })().catch((error: unknown) => {
        if (!controller.signal.aborted) throw error;
      }),
    );
    // Batches, so the listen backlog is not overrun by a thousand connects at once.
    if (index % BATCH === BATCH - 1) await Promise.all(first.slice(index - BATCH + 1, index + 1));
  }
  await Promise.all(first);
  return {
    async release() {
      controller.abort();
      await Promise.allSettled(opened);
      await pool.destroy();
    },
  };
}
