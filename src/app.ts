import Fastify, { LogController, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { DestinationStream } from 'pino';
import type { Config } from './config/schema.js';
import { createKeyCheck } from './http/auth.js';
import { answerClientError } from './http/client-error.js';
import type { ChatPlanner, UsageHook } from './http/chat/planner.js';
import {
  InternalError,
  InvalidRequestError,
  PayloadTooLargeError,
  ProxyError,
  ShuttingDownError,
  UnauthorizedError,
  UnsupportedMediaTypeError,
} from './errors.js';
import { createLogger } from './http/logger.js';
import { Metrics } from './http/metrics.js';
import { promptTokensOf } from './http/prompt-tokens.js';
import { type RequestState, sendError } from './http/request-state.js';
import { chatRoutes } from './http/routes/chat.js';
import { opsRoutes } from './http/routes/ops.js';
import { passthroughRoutes, routeEveryMethod } from './http/routes/passthrough.js';
import { Shutdown } from './http/shutdown.js';
import { discardBoundsFor, discardRestOfBody } from './http/unread-body.js';
import { UpstreamClient, type UpstreamClientOptions } from './upstream/client.js';
import { compactionHooks } from './http/chat/engine-planner.js';
import { CompactionEngine } from './compaction/engine.js';
import { epochStoreOf } from './compaction/epochs/store-of-config.js';
import { type UpstreamJson, chatCallOf, upstreamJsonOf } from './compaction/upstream-json.js';

export type { ChatContext, ChatPlan, ChatPlanner, UsageHook, UsageObservation } from './http/chat/planner.js';

export interface AppDeps {
  /** Where log lines go (stdout when absent); tests pass a stream to read them. */
  readonly logStream?: DestinationStream;
  /** The upstream client; by default one is built from `config.upstream` and closed with the app. */
  readonly upstream?: UpstreamClient;
  /** The compaction step of the chat route (see `src/http/chat-pipeline.ts`). */
  readonly planner?: ChatPlanner;
  /** Receives each chat answer's `usage` / `timings`. */
  readonly onUsage?: UsageHook;
  /**
   * The compaction engine; by default one is built from `config.compaction`
   * (none when `planner` is given, which replaces it).
   */
  readonly compactor?: CompactionEngine;
  /** The summary system prompt (the contents of `compaction.summary.prompt_file`, read by `main.ts`). */
  readonly summaryPrompt?: string;
}

export interface CompactorHandle {
  readonly upstream: UpstreamClient;
  /** The compaction engine, when the chat route uses compactor's own. */
  readonly engine: CompactionEngine | null;
  /** This app's Prometheus metrics (`GET /metrics`). */
  readonly metrics: Metrics;
  /** Whether the app is draining: new requests get 503 + `Retry-After`. */
  readonly draining: boolean;
  /** Starts draining (before `close()` on shutdown). */
  startDraining(): void;
  /** Resolves once draining and no request is in flight (every connection left is then closed). */
  whenIdle(): Promise<void>;
  /**
   * Ends the requests still in flight when the grace period of a shutdown
   * runs out: a chat answer not started gets 503 `shutting_down`, a started
   * stream that error as an SSE event (never a clean end), a pass-through
   * answer its connection cut.
   */
  endInFlight(): void;
}

declare module 'fastify' {
  interface FastifyInstance {
    compactor: CompactorHandle;
  }
}

// Window discovery and exact counts are small JSON calls; a server that takes longer is busy, and the estimate will do.
const UPSTREAM_LOOKUP_TIMEOUT_MS = 10_000;

const NO_REPAIRS: readonly never[] = [];

// Even 32 MiB over a slow link arrives well within this.
const REQUEST_RECEIVE_TIMEOUT_MS = 300_000;

// A restarted compactor is usually back within seconds.
const RETRY_AFTER_SECONDS = 5;

function toProxyError(error: FastifyError, config: Config): ProxyError {
  if (error instanceof ProxyError) return error;
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new PayloadTooLargeError(config.limits.body_bytes);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new UnsupportedMediaTypeError('(invalid)');
    default:
      if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
        return new InvalidRequestError({ code: 'invalid_request', message: 'the request could not be read' });
      }
      return new InternalError(error);
  }
}

/** What the router refuses before any hook runs: chiefly a path with a malformed percent-escape (`/%`, `/v1/models%zz`). */
function frameworkError(error: FastifyError): ProxyError {
  if (error.code === 'FST_ERR_BAD_URL') {
    return new InvalidRequestError({ code: 'invalid_path', message: 'the request path is not a valid URL path: it has a malformed percent-escape' });
  }
  return new InvalidRequestError({ code: 'invalid_request', message: 'the request could not be read' });
}

/**
 * The proxy as a Fastify instance, not listening: `main.ts` listens, tests
 * use `inject()` or listen on port 0.
 */
export function buildApp(config: Config, deps: AppDeps = {}): FastifyInstance {
  const logger = createLogger({ level: config.log.level, format: config.log.format, ...(deps.logStream === undefined ? {} : { stream: deps.logStream }) });
  const clientOptions = (url: string): UpstreamClientOptions => ({
    url,
    apiKey: config.upstream.api_key,
    timeouts: {
      connectMs: config.upstream.timeouts.connect_ms,
      headersMs: config.upstream.timeouts.headers_ms,
      idleMs: config.upstream.timeouts.idle_ms,
    },
  });
  const upstream = deps.upstream ?? new UpstreamClient(clientOptions(config.upstream.url));
  const ownsUpstream = deps.upstream === undefined;
  // Summaries may run on another server (a bigger model, a free GPU); by default on the same one.
  const summaryUpstream = config.compaction.summary.upstream === null ? upstream : new UpstreamClient(clientOptions(config.compaction.summary.upstream));
  const metrics = new Metrics();
  // The epoch store (cache.store): this process's memory, or Redis shared by replicas.
  const epochs = deps.planner === undefined && deps.compactor === undefined ? epochStoreOf(config, { logger, onFault: (operation) => metrics.storeFault(operation) }) : null;
  const engine =
    deps.planner !== undefined
      ? null
      : (deps.compactor ??
        new CompactionEngine({
          config,
          upstream: upstreamJsonOf(upstream, UPSTREAM_LOOKUP_TIMEOUT_MS),
          chat: chatCallOf(summaryUpstream),
          ...(epochs === null ? {} : { store: epochs.store }),
          logger,
          observer: metrics,
          ...(deps.summaryPrompt === undefined ? {} : { summaryPrompt: deps.summaryPrompt }),
        }));
  if (engine !== null) metrics.watch({ epochCount: () => engine.epochCount, runningSummaries: () => engine.runningSummaries });
  const engineHooks = engine === null ? undefined : compactionHooks(engine, upstream);
  const keyCheck = config.auth.keys.length > 0 ? createKeyCheck(config.auth.keys) : undefined;
  let draining = false;
  let inFlight = 0;
  const idleWaiters: Array<() => void> = [];
  const shutdown = new Shutdown();
  // Once draining and idle, every connection left is closed: server.close()
  // only reaps idle keep-alive ones, and a socket a client opened without
  // sending a request yet would hold the shutdown until its headers timeout.
  const closeConnectionsWhenIdle = (): void => {
    if (!draining || inFlight !== 0) return;
    if (app.server.listening) app.server.closeAllConnections();
    for (const resolve of idleWaiters.splice(0)) resolve();
  };

  const app = Fastify({
    loggerInstance: logger,
    // One line per request is written below, with the fields that matter here.
    logController: new LogController({ disableRequestLogging: true }),
    // Draining answers 503 in OpenAI's shape, with Retry-After (see onRequest).
    return503OnClosing: false,
    bodyLimit: config.limits.body_bytes,
    // A client trickling its request (headers and body) may hold a connection this long, no longer;
    // answers are not bounded by it, so a stream of many minutes is unaffected.
    requestTimeout: REQUEST_RECEIVE_TIMEOUT_MS,
    // Called before the onRequest hook: there is no request state yet, and a throw here would end the process.
    frameworkErrors: (error, request, reply) => {
      request.log.debug({ code: error.code }, 'request rejected by the framework');
      sendError(reply, frameworkError(error));
    },
    // What Node's parser refuses (headers over 16 KiB, Content-Length with Transfer-Encoding) is answered in OpenAI's shape too.
    clientErrorHandler: answerClientError,
  }) as unknown as FastifyInstance;
  routeEveryMethod(app);

  app.decorate('compactor', {
    upstream,
    engine,
    metrics,
    get draining() {
      return draining;
    },
    startDraining() {
      draining = true;
      closeConnectionsWhenIdle();
    },
    whenIdle() {
      return new Promise<void>((resolve) => {
        idleWaiters.push(resolve);
        closeConnectionsWhenIdle();
      });
    },
    endInFlight() {
      shutdown.endAll(new ShuttingDownError(RETRY_AFTER_SECONDS));
    },
  } satisfies CompactorHandle);
  app.decorateRequest('compactor', null as unknown as RequestState);

  app.addHook('onRequest', async (request, reply) => {
    const kind = request.routeOptions.config.kind ?? 'passthrough';
    const state: RequestState = {
      kind,
      startedAt: performance.now(),
      upstreamMs: null,
      bytes: 0,
      repairs: 0,
      pairRepairs: NO_REPAIRS,
      errorCode: null,
      errorStatus: null,
      report: null,
      tenant: '',
    };
    request.compactor = state;
    // Deferred a turn, so the route's own close handling has recorded how the request ended.
    inFlight++;
    reply.raw.once('close', () => {
      const finished = reply.raw.writableEnded;
      const totalMs = performance.now() - state.startedAt;
      setImmediate(() => {
        inFlight--;
        logRequest(request, reply, finished, totalMs);
        metrics.request(state.kind, state.errorStatus ?? reply.raw.statusCode, totalMs, state.upstreamMs);
        if (state.pairRepairs.length > 0) metrics.pairRepairs(state.pairRepairs);
        closeConnectionsWhenIdle();
      });
    });
    if (kind === 'ops') return;
    if (draining) return sendError(reply, new ShuttingDownError(RETRY_AFTER_SECONDS));
    if (keyCheck !== undefined) {
      const authorization = request.headers.authorization;
      const result = keyCheck(authorization);
      if (!result.ok) return sendError(reply, new UnauthorizedError());
      state.tenant = result.tenant;
    }
    return;
  });

  const discardBounds = discardBoundsFor(config.limits.body_bytes);
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const proxyError = toProxyError(error, config);
    if (proxyError instanceof InternalError) request.log.error({ err: error }, 'request failed');
    if (proxyError instanceof PayloadTooLargeError) {
      // Fastify asks to close the connection, which resets a client still uploading before it reads the 413:
      // the rest of the body is read and dropped instead (bounded), and the connection stays open.
      reply.removeHeader('connection');
      discardRestOfBody(request.raw, discardBounds);
    }
    return sendError(reply, proxyError);
  });

  const planner = deps.planner ?? engineHooks?.planner;
  const onUsage = withPromptTokens(deps.onUsage, metrics);
  const options = {
    config,
    upstream,
    hooks: { ...(planner ? { planner } : {}), onUsage },
    streams: { opened: () => metrics.streamOpened(), closed: () => metrics.streamClosed() },
    onContextExceeded: (model: string) => metrics.contextExceeded(model),
  };
  app.register(async (scope) =>
    opsRoutes(scope, {
      upstream,
      isDraining: () => draining,
      retryAfterSeconds: RETRY_AFTER_SECONDS,
      metrics,
      // Windows matter to compaction only; with it off, readiness asks the upstream nothing more.
      // Said only for a shared store: a memory store is never degraded.
      ...(epochs === null || config.cache.store === 'memory' ? {} : { store: epochs.state }),
      ...(engine === null || !config.compaction.enabled ? {} : { windows: () => knownWindows(engine, upstreamJsonOf(upstream, UPSTREAM_LOOKUP_TIMEOUT_MS), config) }),
    }),
  );
  app.register(async (scope) => chatRoutes(scope, { ...options, shutdown }));
  app.register(async (scope) => passthroughRoutes(scope, { upstream, shutdown }));

  app.addHook('onClose', async () => {
    if (summaryUpstream !== upstream) await summaryUpstream.close();
    if (ownsUpstream) await upstream.close();
    await epochs?.close();
  });
  return app;
}

/**
 * The context window per model, for `/readyz`: those configured, and those
 * found so far. Before any chat request has asked, the upstream's first
 * listed model is looked up, so a fresh compactor shows the window it will
 * work with.
 */
async function knownWindows(engine: CompactionEngine, upstream: UpstreamJson, config: Config): Promise<Record<string, number | null>> {
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

/** The app's usage hook (if any), then the prompt-token counters, for every answered chat request. */
function withPromptTokens(onUsage: UsageHook | undefined, metrics: Metrics): UsageHook {
  return (observation) => {
    onUsage?.(observation);
    const tokens = promptTokensOf(observation);
    if (tokens !== null) metrics.promptTokens(tokens);
  };
}

/** How many of each kind of tool-pair repair (`{ orphan: 1, missing: 1 }`): kinds only, never ids or text. */
function repairKinds(repairs: RequestState['pairRepairs']): Record<string, number> {
  const kinds: Record<string, number> = {};
  for (const repair of repairs) kinds[repair.kind] = (kinds[repair.kind] ?? 0) + 1;
  return kinds;
}

/**
 * The one line per request: what happened, never what was said or who said it.
 * `status` is the error's when a started answer ended in one (`sentStatus` is
 * then the 200 that went out first); `compaction` is what the `x-compactor`
 * header said (counts and sizes only).
 */
function logRequest(request: FastifyRequest, reply: FastifyReply, finished: boolean, totalMs: number): void {
  const state = request.compactor;
  const response = reply.raw;
  const queryStart = request.url.indexOf('?');
  const fields = {
    method: request.method,
    route: state.kind,
    path: queryStart === -1 ? request.url : request.url.slice(0, queryStart),
    status: state.errorStatus ?? response.statusCode,
    ...(state.errorStatus === null ? {} : { sentStatus: response.statusCode }),
    ms: Math.round(totalMs * 100) / 100,
    upstreamMs: state.upstreamMs === null ? null : Math.round(state.upstreamMs * 100) / 100,
    bytes: state.bytes > 0 ? state.bytes : Number(response.getHeader('content-length') ?? 0),
    repairs: state.repairs,
    ...(state.pairRepairs.length === 0 ? {} : { repairKinds: repairKinds(state.pairRepairs) }),
    ...(state.report === null ? {} : { compaction: state.report }),
    ...(state.errorCode === null ? {} : { error: state.errorCode }),
    ...(finished ? {} : { aborted: true }),
  };
  // Probes hit the ops routes every few seconds; their lines would drown the rest.
  if (state.kind === 'ops') request.log.debug(fields, 'request');
  else request.log.info(fields, 'request');
}
