import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { DestinationStream } from 'pino';
import type { Config } from './config/schema.js';
import { createKeyCheck } from './http/edge/auth.js';
import { BodyBudget } from './http/edge/body-budget.js';
import { capConnections, connectionBoundOf } from './http/edge/connection-cap.js';
import { answerClientError } from './http/edge/client-error.js';
import type { ChatHooks, ChatPlanner, UsageHook } from './http/exchange/planner.js';
import { ShuttingDownError } from './errors.js';
import { frameworkError } from './http/edge/framework-errors.js';
import { InFlight } from './http/edge/in-flight.js';
import { reduceMemoryWhenIdle } from './http/ops/memory-reducer.js';
import { knownWindows } from './http/ops/known-windows.js';
import { createLogger } from './http/ops/logger.js';
import { Metrics } from './http/ops/metrics.js';
import { registerSlotMetrics } from './http/ops/slot-metrics.js';
import { SlotRouter } from './slots/slot-router.js';
import { SlotFiles } from './slots/slot-files.js';
import { slotAwareChat } from './slots/summary-call.js';
import { withPromptTokens } from './http/exchange/prompt-tokens.js';
import { KnownPrefixes } from './compaction/epochs/known-prefixes.js';
import { PrefixLedger } from './http/ledger/prefix-breaks.js';
import { ServerLedger, measuredChatCall } from './http/ledger/server-ledger.js';
import { ServerSpeeds } from './upstream/server-speeds.js';
import { type RequestRecord, sendError } from './http/edge/request-record.js';
import { chatRoutes } from './http/routes/chat.js';
import { compactRoutes } from './http/routes/compact.js';
import { NotesSeal } from './http/exchange/sealed-notes.js';
import { runResponsesCompaction } from './http/exchange/responses-compact.js';
import { dashboardRoutes } from './http/routes/dashboard.js';
import { answeredOf, bothObservers, DashboardState } from './http/ops/dashboard-state.js';
import { opsRoutes } from './http/routes/ops.js';
import { passthroughRoutes, routeEveryMethod } from './http/routes/passthrough.js';
import { Shutdown } from './http/ops/shutdown.js';
import { addRequestHooks } from './http/edge/request-hooks.js';
import { type Upstream, UpstreamClient, type UpstreamClientOptions } from './upstream/client.js';
import { Fleet } from './fleet/fleet.js';
import { FleetServer } from './fleet/fleet-server.js';
import { FleetUpstream } from './fleet/fleet-upstream.js';
import { fleetChat } from './fleet/fleet-chat.js';
import { RedisRoutingStore } from './fleet/routing-store.js';
import { maskUrl } from './config/mask.js';
import { registerFleetMetrics } from './http/ops/fleet-metrics.js';
import { compactionHooks } from './http/exchange/engine-planner.js';
import { CompactionEngine } from './compaction/engine/engine.js';
import { type ConfiguredStore, epochStoreOf } from './compaction/epochs/store-of-config.js';
import type { TierList } from './compaction/policy/tiers/tier.js';
import type { ChatCall } from './compaction/ports.js';
import { chatCallOf, upstreamJsonOf } from './upstream/json-surface.js';
import { WIRE_FORMATS, type WireFormat } from './formats/registry.js';

/**
 * The wiring: the upstream clients, the compaction engine, the metrics, the
 * logger and the routes, put together into one Fastify instance. What a
 * request goes through is in src/http/ (in-flight.ts, the routes, chat/).
 */

export type { ChatContext, ChatPlan, ChatPlanner, UsageHook, UsageObservation } from './http/exchange/planner.js';

export interface AppDeps {
  /** Where log lines go (stdout when absent); tests pass a stream to read them. */
  readonly logStream?: DestinationStream;
  /** The upstream client; by default one is built from `config.upstream` and closed with the app. */
  readonly upstream?: UpstreamClient;
  /** The compaction step of the chat route (see `src/http/exchange/planner.ts`). */
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
  /** The wire formats served: the registry's (src/formats/registry.ts) when absent; a test serves a toy one beside them. */
  readonly formats?: readonly WireFormat[];
  /** The compaction tiers of the engine built here, cheapest first; the built-in list (policy/tiers/list.ts) when absent. */
  readonly tiers?: TierList;
  /** How long a large body waits for its place in `limits.in_flight_bytes` before its 503 (10 s when absent; a test says 0). */
  readonly bodyWaitMs?: number;
}

export interface ProxyHandle {
  readonly upstream: Upstream;
  /** The fleet, with two servers or more (upstream.servers). */
  readonly fleet: Fleet | undefined;
  /** The compaction engine, when the chat route uses compactor's own. */
  readonly engine: CompactionEngine | null;
  /** This app's Prometheus metrics (`GET /metrics`). */
  readonly metrics: Metrics;
  /** Whether the app is draining: new requests get 503 + `Retry-After`. */
  readonly draining: boolean;
  /** The epoch store in words, for the start line (a Redis store is asked whether it answers). */
  describeStore(): Promise<string>;
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
    proxy: ProxyHandle;
  }
}

// Window discovery and exact counts are small JSON calls; a server that takes longer is busy, and the estimate will do.
const UPSTREAM_LOOKUP_TIMEOUT_MS = 10_000;

// Even 32 MiB over a slow link arrives well within this.
const REQUEST_RECEIVE_TIMEOUT_MS = 300_000;

// A restarted compactor is usually back within seconds.
const RETRY_AFTER_SECONDS = 5;
/** How long a large body waits for its place in limits.in_flight_bytes before its 503: a few bodies' read and plan. */
const BODY_WAIT_MS = 10_000;

function clientOptions(config: Config, url: string, apiKey: string | null): UpstreamClientOptions {
  return {
    url,
    apiKey,
    timeouts: {
      connectMs: config.upstream.timeouts.connect_ms,
      headersMs: config.upstream.timeouts.headers_ms,
      idleMs: config.upstream.timeouts.idle_ms,
    },
  };
}

/** The upstream (one server's client, or the fleet's), and the one summaries go to (the same unless `summary.upstream` names another server). */
function upstreamsOf(config: Config, deps: AppDeps, fleet: Fleet | undefined): { upstream: Upstream; summaryUpstream: Upstream } {
  const upstream = deps.upstream ?? (fleet === undefined ? new UpstreamClient(clientOptions(config, config.upstream.url, config.upstream.api_key)) : new FleetUpstream(fleet));
  // Summaries may run on another server (a bigger model, a free GPU); by default on the same one.
  // Another server gets its own key (summary.api_key) or none: never the client's, never upstream.api_key.
  const { summary } = config.compaction;
  const summaryUpstream = summary.upstream === null ? upstream : new UpstreamClient(clientOptions(config, summary.upstream, summary.api_key));
  return { upstream, summaryUpstream };
}

/**
 * A fleet (issue 39) when `upstream.servers` names two servers or more and no
 * client was handed in: each server with its own client (its key, else
 * upstream.api_key) and its own slots. One server is no fleet: everything
 * goes as it did before fleets.
 */
function fleetOf(config: Config, deps: AppDeps, logger: FastifyBaseLogger, metrics: Metrics, speeds: ServerSpeeds, routing: RedisRoutingStore | undefined): Fleet | undefined {
  const { servers } = config.upstream;
  if (deps.upstream !== undefined || servers.length < 2) return undefined;
  // Servers on one shared --slot-save-path: one record of its files, so a conversation saved on one is restored on another.
  const { slot_save: save, slot_save_shared: shared, slot_save_max_bytes: maxBytes } = config.upstream;
  const files = save && shared ? { files: new SlotFiles(maxBytes) } : {};
  const members = servers.map((server, index) => {
    const client = new UpstreamClient(clientOptions(config, server.url, server.api_key ?? config.upstream.api_key));
    const leases = routing === undefined ? {} : { leases: { store: routing, name: maskUrl(server.url)! } };
    // Speeds are learned under the server's label (the ledger reads the answering server's from the request's figures).
    const slots = config.upstream.slots === 'auto' ? new SlotRouter({ upstream: client, config: config.upstream, log: logger, msToRead: msToReadOn(speeds, maskUrl(server.url)!), backgroundInLine: config.compaction.summary.concurrency, ...leases, ...files }) : undefined;
    return new FleetServer(index, server, client, slots);
  });
  const fleet = new Fleet({ servers: members, intervalMs: config.upstream.health_interval_ms, log: logger, maxHomes: config.cache.max_entries, ...(routing === undefined ? {} : { shared: routing }) });
  if (config.upstream.slots === 'auto') {
    registerSlotMetrics(metrics.registry, () => members.flatMap((server) => server.slots!.stats().map((each) => ({ ...each, server: server.label }))), { byServer: true });
  }
  registerFleetMetrics(metrics.registry, fleet);
  return fleet;
}

interface EngineParts {
  readonly upstream: Upstream;
  readonly summaryUpstream: Upstream;
  readonly fleet: Fleet | undefined;
  readonly logger: FastifyBaseLogger;
  readonly metrics: Metrics;
  readonly dashboard: DashboardState | null;
  readonly slots: SlotRouter | undefined;
  readonly ledger: ServerLedger;
  readonly speeds: ServerSpeeds;
}

/**
 * The compaction engine, by how the app was given its planning: a planner
 * (it replaces the engine: none), an engine (used as it is), or neither (one
 * built here, with the epoch store `cache.store` names).
 */
function engineOf(config: Config, deps: AppDeps, parts: EngineParts): { engine: CompactionEngine | null; epochs: ConfiguredStore | null } {
  if (deps.planner !== undefined) return { engine: null, epochs: null };
  if (deps.compactor !== undefined) return { engine: deps.compactor, epochs: null };
  const { upstream, summaryUpstream, fleet, logger, metrics, dashboard, slots, ledger, speeds } = parts;
  const epochs = epochStoreOf(config, { logger, onFault: (operation) => metrics.storeFault(operation), onBadValue: (reason) => metrics.storeBadValue(reason) });
  const summaryUrl = config.compaction.summary.upstream ?? config.upstream.url;
  const chat = measuredChatCall(chatCallOf(summaryUpstream, { clientCredentials: summaryUpstream === upstream }), ledger, summaryUrl);
  // On a fleet, a summary runs on its conversation's server, through that server's slots, its speeds learned under its name.
  const onServer = (server: FleetServer): ChatCall => {
    const call = measuredChatCall(chatCallOf(server.client, { clientCredentials: true }), ledger, server.label);
    return server.slots === undefined ? call : slotAwareChat(call, server.slots);
  };
  const engine = new CompactionEngine({
    config,
    upstream: upstreamJsonOf(upstream, UPSTREAM_LOOKUP_TIMEOUT_MS),
    // Summaries on the main upstream go through its slots (a suffix one in its conversation's slot queue).
    chat: fleet !== undefined && summaryUpstream === upstream ? fleetChat(fleet, onServer) : slots === undefined || summaryUpstream !== upstream ? chat : slotAwareChat(chat, slots),
    store: epochs.store,
    logger,
    observer: dashboard === null ? metrics : bothObservers(metrics, dashboard),
    ...(deps.summaryPrompt === undefined ? {} : { summaryPrompt: deps.summaryPrompt }),
    ...(deps.tiers === undefined ? {} : { tiers: deps.tiers }),
    speeds: (model) => {
      // A fleet's servers are learned each under its own name; the engine plans with the first healthy one's.
      const learned = speeds.speedsOf(fleet === undefined ? config.upstream.url : fleet.any().label, model);
      return learned === null ? null : { ...learned, summaryTokens: speeds.summaryTokensOf(summaryUrl, model) };
    },
  });
  return { engine, epochs };
}

/** The chat route's hooks: the planner (the app's, else the engine's), usage to the metrics and the dashboard, and the refusal hook. */
function chatHooksOf(
  config: Config,
  deps: AppDeps,
  engineHooks: ReturnType<typeof compactionHooks> | undefined,
  metrics: Metrics,
  dashboard: DashboardState | null,
  ledger: ServerLedger,
): ChatHooks {
  const planner = deps.planner ?? engineHooks?.planner;
  const onUsage: UsageHook = withPromptTokens(deps.onUsage, metrics, (observation, tokens) => {
    const cost = ledger.answered(observation);
    dashboard?.answered(answeredOf(observation, tokens, cost));
  });
  // Planning again after a refusal helps only when the engine compacts (observe mode forwards what the client sent).
  const replans = engineHooks !== undefined && config.compaction.enabled && config.compaction.mode === 'compact';
  return { ...(planner ? { planner } : {}), onUsage, ...(replans ? { onRefusal: engineHooks.onRefusal } : {}) };
}

/**
 * Where replicas agree on routing (issue 39): homes and slot leases in the
 * Redis the epochs use, when `cache.store` is redis and slots or a fleet
 * need it; none otherwise (each replica alone, as before).
 */
function routingStoreOf(config: Config, deps: AppDeps, logger: FastifyBaseLogger): RedisRoutingStore | undefined {
  const { cache, upstream } = config;
  if (deps.upstream !== undefined) return undefined;
  if (cache.store !== 'redis' || cache.redis.url === null) return undefined;
  if (upstream.slots !== 'auto' && upstream.servers.length < 2) return undefined;
  const urls = typeof cache.redis.url === 'string' ? [cache.redis.url] : cache.redis.url;
  return new RedisRoutingStore({ urls, cluster: cache.redis.cluster, keyPrefix: cache.redis.key_prefix, timeoutMs: cache.redis.timeout_ms, homeTtlMs: cache.ttl_s * 1000, log: logger });
}

/** A turn waits for its home slot no longer than re-reading it elsewhere would take at the prefill speed the ledger learned for `server` (issue 33 item 4). */
function msToReadOn(speeds: ServerSpeeds, server: string): (model: string, tokens: number) => number | null {
  return (model, tokens) => {
    const learned = speeds.speedsOf(server, model);
    return learned === null ? null : (tokens * 1000) / learned.prefill;
  };
}

/** One slot per conversation on the llama-server (upstream.slots), for its turns and its summaries, with its metrics. */
function slotsOf(config: Config, upstream: Upstream, logger: FastifyBaseLogger, metrics: Metrics, speeds: ServerSpeeds, fleet: Fleet | undefined, routing: RedisRoutingStore | undefined): SlotRouter | undefined {
  // A fleet's servers have their own slots (fleetOf).
  if (config.upstream.slots !== 'auto' || fleet !== undefined) return undefined;
  const leases = routing === undefined ? {} : { leases: { store: routing, name: maskUrl(config.upstream.url)! } };
  const slots = new SlotRouter({ upstream, config: config.upstream, log: logger, msToRead: msToReadOn(speeds, config.upstream.url), backgroundInLine: config.compaction.summary.concurrency, ...leases });
  registerSlotMetrics(metrics.registry, () => slots.stats());
  return slots;
}

function fastifyOf(config: Config, logger: FastifyBaseLogger): FastifyInstance {
  return Fastify({
    loggerInstance: logger,
    // One line per request is written when its response closes (src/http/edge/in-flight.ts, request-log.ts).
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
}

/**
 * The proxy as a Fastify instance, not listening: `main.ts` listens, tests
 * use `inject()` or listen on port 0.
 */
export function buildApp(config: Config, deps: AppDeps = {}): FastifyInstance {
  const logger = createLogger({ level: config.log.level, format: config.log.format, ...(deps.logStream === undefined ? {} : { stream: deps.logStream }) });
  const metrics = new Metrics();
  const routing = routingStoreOf(config, deps, logger);
  // The speeds the ledger learns per server: they also bound a turn's wait for its home slot (issue 33 item 4).
  const speeds = new ServerSpeeds();
  const fleet = fleetOf(config, deps, logger, metrics, speeds, routing);
  const { upstream, summaryUpstream } = upstreamsOf(config, deps, fleet);
  const dashboard = config.dashboard.enabled
    ? new DashboardState({ maxConversations: config.dashboard.max_conversations, maxEvents: config.dashboard.max_events, showText: config.dashboard.show_text })
    : null;
  const slots = slotsOf(config, upstream, logger, metrics, speeds, fleet, routing);
  const ledger = new ServerLedger({ upstream: config.upstream.url, speeds, breaks: new PrefixLedger(), listener: metrics });
  metrics.watch({ speeds: () => speeds.snapshot() });
  dashboard?.watch({ speeds: () => speeds.snapshot(), summarySeconds: () => ledger.summarySeconds, ...(fleet === undefined ? {} : { servers: () => fleet.rows() }) });
  const { engine, epochs } = engineOf(config, deps, { upstream, summaryUpstream, fleet, logger, metrics, dashboard, slots, ledger, speeds });
  if (engine !== null) metrics.watch({ epochCount: () => engine.epochCount, epochBytes: () => engine.epochBytes, runningSummaries: () => engine.runningSummaries });
  const engineHooks = engine === null ? undefined : compactionHooks(engine, upstream, config.compaction.mode);
  const shutdown = new Shutdown();
  const inFlight = new InFlight(
    metrics,
    dashboard === null ? undefined : (request, status) => dashboard.ended(request, status),
  );

  const app = fastifyOf(config, logger);
  capConnections(app.server, connectionBoundOf(config.limits.max_connections), logger);
  routeEveryMethod(app);
  inFlight.serve(app.server);
  app.decorate('proxy', proxyHandleOf({ upstream, engine, epochs, metrics, inFlight, shutdown, fleet }));
  app.decorateRequest('record', null as unknown as RequestRecord);
  app.decorateRequest('arrival', null);
  addRequestHooks(app, { config, inFlight, retryAfterSeconds: RETRY_AFTER_SECONDS });

  // The key of the compaction items /v1/responses/compact seals (issue 38): configured, else this process's own.
  const seal = new NotesSeal(config.compaction.seal_key ?? config.cache.redis.secret);
  const onCarried = (outcome: 'opened' | 'refused', count: number): void => metrics.compactionItem(outcome, count);
  // One bound for the large bodies of every route that reads and plans them: chat (all formats) and both compactions.
  const bodies = new BodyBudget(config.limits.in_flight_bytes, deps.bodyWaitMs ?? BODY_WAIT_MS);
  const compactOptions = { config, upstream, engine, bodies, seal, onSealed: () => metrics.compactionItem('sealed'), onCarried };
  const chatOptions = {
    config,
    upstream,
    hooks: chatHooksOf(config, deps, engineHooks, metrics, dashboard, ledger),
    streams: { opened: () => metrics.streamOpened(), closed: () => metrics.streamClosed() },
    onContextExceeded: (model: string) => metrics.contextExceeded(model),
    shutdown,
    formats: deps.formats ?? WIRE_FORMATS,
    ...(slots === undefined ? {} : { slots }),
    bodies,
    seal,
    onCarried,
    answerCompaction: (request: FastifyRequest, reply: FastifyReply) => runResponsesCompaction(request, reply, compactOptions, 'trigger'),
    ...(fleet === undefined ? {} : { fleet }),
    // The engine's own records, so a request's bytes are proved once for its plan and its print.
    prefixes: engine?.prefixes ?? new KnownPrefixes(),
  };
  app.register(async (scope) =>
    opsRoutes(scope, {
      upstream,
      isDraining: () => inFlight.draining,
      retryAfterSeconds: RETRY_AFTER_SECONDS,
      metrics,
      // Windows matter to compaction only; with it off, readiness asks the upstream nothing more.
      // Said only for a shared store: a memory store is never degraded.
      ...(epochs === null || config.cache.store === 'memory' ? {} : { store: epochs.state }),
      ...(engine === null || !config.compaction.enabled ? {} : { windows: () => knownWindows(engine, upstreamJsonOf(upstream, UPSTREAM_LOOKUP_TIMEOUT_MS), config) }),
    }),
  );
  app.register(async (scope) => chatRoutes(scope, chatOptions));
  app.register(async (scope) => compactRoutes(scope, compactOptions));
  if (dashboard !== null) registerDashboard(app, config, dashboard, engine);
  app.register(async (scope) => passthroughRoutes(scope, { upstream, shutdown }));

  if (config.memory.reduce_when_idle) reduceMemoryWhenIdle(app, () => inFlight.started);
  if (fleet !== undefined) app.addHook('onReady', async () => fleet.start());
  app.addHook('onClose', async () => {
    if (summaryUpstream !== upstream) await summaryUpstream.close();
    if (deps.upstream === undefined) await upstream.close();
    routing?.close();
    await Promise.resolve(engine?.shareRatios()).then(() => epochs?.close()); // this replica's last measures reach the others before its store closes
  });
  return app;
}

/** The dashboard's routes; its admin keys see every tenant. */
function registerDashboard(app: FastifyInstance, config: Config, dashboard: DashboardState, engine: CompactionEngine | null): void {
  const adminCheck = config.auth.admin_keys.length > 0 ? createKeyCheck(config.auth.admin_keys) : undefined;
  app.register(async (scope) =>
    dashboardRoutes(scope, { config, state: dashboard, adminCheck, windows: () => (engine === null ? {} : engine.windows.snapshot()) }),
  );
}

function proxyHandleOf(parts: {
  upstream: Upstream;
  engine: CompactionEngine | null;
  epochs: ConfiguredStore | null;
  metrics: Metrics;
  inFlight: InFlight;
  shutdown: Shutdown;
  fleet: Fleet | undefined;
}): ProxyHandle {
  const { upstream, engine, epochs, metrics, inFlight, shutdown, fleet } = parts;
  return {
    upstream,
    fleet,
    engine,
    metrics,
    get draining() {
      return inFlight.draining;
    },
    describeStore() {
      return epochs === null ? Promise.resolve("none (the planner is not compactor's)") : epochs.describe();
    },
    startDraining() {
      inFlight.startDraining();
    },
    whenIdle() {
      return inFlight.whenIdle();
    },
    endInFlight() {
      shutdown.endAll(new ShuttingDownError(RETRY_AFTER_SECONDS));
    },
  };
}
