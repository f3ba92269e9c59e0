import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../../config/schema.js';
import type { Upstream } from '../../upstream/client.js';
import { type UpstreamInspection, inspectUpstream } from '../../upstream/inspect.js';

/**
 * What compactor says as it starts (main.ts): a port in use in words that fix
 * it, one line with what it runs as, what it found upstream, and, when the
 * upstream was not ready (llama-server loading its model takes minutes),
 * `upstream ready` the moment it is, from a background probe with back-off.
 */

/** The probe's first wait and its longest: a model loads in seconds to minutes; one small request per half minute at most. */
const PROBE_FIRST_MS = 1_000;
const PROBE_MAX_MS = 30_000;

/** llama-server's health check answered 508 `loop_detected`: the request came back through compactor. */
const LOOP_STATUS = 508;

/** A listen error said for a person; null when it is not one of the two a configuration causes. */
export function listenProblem(error: unknown, host: string, port: number): string | null {
  const code = error instanceof Error && 'code' in error ? String(error.code) : '';
  if (code === 'EADDRINUSE') return `listen: port ${port} on ${host} is already in use (another compactor, or the upstream itself?); choose another with --port or COMPACTOR_PORT (listen.port)`;
  if (code === 'EACCES') return `listen: port ${port} on ${host} needs privileges; choose one above 1023 with --port or COMPACTOR_PORT (listen.port)`;
  if (code === 'EADDRNOTAVAIL') return `listen: ${host} is not an address of this machine; set --host or COMPACTOR_HOST (listen.host)`;
  return null;
}

/** `compactor 0.1.0 listening on http://127.0.0.1:8081: mode compact, store memory, upstream http://127.0.0.1:8080`. */
export function startLine(options: { version: string; address: string; config: Config; store: string; upstream: string }): string {
  const mode = options.config.compaction.enabled ? options.config.compaction.mode : 'off (compaction disabled)';
  return `compactor ${options.version} listening on ${options.address}: mode ${mode}, store ${options.store}, upstream ${options.upstream}`;
}

/** Whether the inspection found compactor itself at the upstream's address (its own 508). */
export function pointsAtItself(found: UpstreamInspection): boolean {
  return found.state === 'not ready' && found.status === LOOP_STATUS;
}

/** One line on what the upstream is: a person reads it before sending anything. */
export function logInspection(log: FastifyBaseLogger, upstream: string, found: UpstreamInspection): void {
  switch (found.state) {
    case 'ready': {
      const models = found.models.map((model) => ({ id: model.id, window: model.window, source: model.source }));
      log.info({ upstream, kind: found.kind, models, slots: found.slots }, `upstream ready: ${found.kind}, ${found.models.length} model(s)`);
      if (found.truncatesSilently) {
        log.warn(
          { upstream, kind: found.kind },
          `${found.kind} cuts a prompt longer than the window it runs with without an error (its OpenAI endpoint keeps the end within num_ctx): ` +
            'compactor plans every request with that window so none is cut; in observe mode, or with compaction off, nothing stops the cut',
        );
      }
      return;
    }
    case 'not ready':
      log.warn({ upstream, status: found.status }, `upstream not ready: ${found.reason}; requests get its answers until it is; "upstream ready" is logged when it is`);
      return;
    case 'unreachable':
      log.warn({ upstream }, `upstream unreachable: ${found.reason}; chat requests get 502 until it answers; "upstream ready" is logged when it does`);
  }
}

/**
 * Asks the upstream again and again (1 s, 2 s, 4 s … at most 30 s apart)
 * until it is ready, then logs `upstream ready` once. The timers never keep
 * the process alive; `stop()` ends the probe (a shutdown).
 */
export function probeUntilReady(upstream: Upstream, log: FastifyBaseLogger, url: string): { stop(): void } {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const schedule = (waitMs: number): void => {
    timer = setTimeout(() => void attempt(waitMs), waitMs);
    timer.unref();
  };
  const attempt = async (waitedMs: number): Promise<void> => {
    const found = await inspectUpstream(upstream);
    if (stopped) return;
    if (found.state === 'ready') logInspection(log, url, found);
    else schedule(Math.min(waitedMs * 2, PROBE_MAX_MS));
  };
  schedule(PROBE_FIRST_MS);
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
