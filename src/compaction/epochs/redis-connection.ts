import { createRequire } from 'node:module';
import type { Cluster, ClusterNode, Redis } from 'ioredis';

// ioredis is loaded only when a Redis store is configured: the default memory store starts ~90 ms sooner
// without it (measured: `node -e "import('ioredis')"` 0.20 s against node alone 0.11 s).
const loadIoredis = (): typeof import('ioredis') => createRequire(import.meta.url)('ioredis') as typeof import('ioredis');

/**
 * The connection of a Redis epoch store: one server (`Redis`) or a Redis
 * Cluster (`Cluster`, from seed nodes), the scripts it runs, the wait for a
 * process's first connection and each command's deadline. What a fault means
 * (memory answers, counted, warned once) is store-health.ts's and repository.ts's.
 */

/** The store's scripts, as ioredis defines them on the client (sent with EVALSHA, re-sent whole after a restart). */
export interface StoreScripts {
  epochLookupBuffer(...args: Array<string | number>): Promise<[Array<number | Buffer>, number, Buffer]>;
  ratioShare(key: string, ttlMs: number, entries: number, value: string): Promise<number>;
  ratioRead(key: string): Promise<string[]>;
  backoffRead(key: string): Promise<[string, number]>;
  epochLeaseRenew(key: string, token: string, ttlMs: number): Promise<number>;
  epochLeaseRelease(key: string, token: string): Promise<number>;
}

export type StoreClient = (Redis | Cluster) & StoreScripts;

export interface RedisConnectionOptions {
  /** One server's URL; with `cluster`, the seed nodes' URLs (any one reachable node is enough). */
  readonly urls: readonly string[];
  readonly cluster: boolean;
  /** A command slower than this is rejected (a fault): the request goes on with memory. */
  readonly timeoutMs: number;
  readonly scripts: Record<string, { lua: string; numberOfKeys?: number }>;
}

/**
 * Reconnection back-off: quick at first (a restart takes a second or two),
 * never slower than every 2 s, so a replica is back on Redis within 2 s of
 * its return.
 */
const RECONNECT_MAX_MS = 2_000;
const reconnectDelay = (times: number): number => Math.min(50 * 2 ** times, RECONNECT_MAX_MS);

/**
 * A connection attempt that takes longer than this has failed. Also how long
 * the first commands of a process wait for its first connection: before it
 * the replica knows no epoch at all, and answering from its empty memory made
 * a restarted replica summarize a whole conversation again (issue 27).
 */
export const CONNECT_TIMEOUT_MS = 2_000;

/**
 * The bound of a patient command: one asked before a summary would be written
 * on the strength of an answer the store did not give in time. A summary
 * takes seconds; a second look at the store costs far less than a summary
 * every other replica would not have made.
 */
export const PATIENT_TIMEOUT_MS = 1_000;

export class RedisConnection {
  readonly client: StoreClient;
  /** host:port of the first URL, for the log lines (never the URL: it may hold a password). */
  readonly host: string;
  /** The connection's last error (`connect ECONNREFUSED 127.0.0.1:6379`): what a command refused while disconnected is told. */
  lastError: string | null = null;
  readonly #options: RedisConnectionOptions;
  /** Settles on the first connection, or when {@link CONNECT_TIMEOUT_MS} has passed without one. */
  readonly #firstConnection: Promise<void>;
  #connectedOnce = false;

  constructor(options: RedisConnectionOptions) {
    this.#options = options;
    const first = new URL(options.urls[0]!);
    this.host = `${first.hostname}:${first.port === '' ? '6379' : first.port}`;
    this.client = options.cluster ? clusterClient(options) : serverClient(options);
    // Without a listener an unreachable server would be an unhandled 'error' event; faults are reported per command.
    this.client.on('error', (error: Error) => {
      this.lastError = error.message;
    });
    this.#firstConnection = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, CONNECT_TIMEOUT_MS);
      timer.unref();
      this.client.once('ready', () => {
        clearTimeout(timer);
        resolve();
      });
      this.client.once('end', resolve);
    });
    this.client.on('ready', () => {
      this.#connectedOnce = true;
    });
  }

  get ready(): boolean {
    return this.client.status === 'ready';
  }

  onReady(listener: () => void): void {
    this.client.on('ready', listener);
  }

  /** Resolves at once once connected before; else on the first connection, or {@link CONNECT_TIMEOUT_MS} without one. */
  async firstConnection(): Promise<void> {
    if (!this.#connectedOnce) await this.#firstConnection;
  }

  /** Runs one command within the bound (`patient`: {@link PATIENT_TIMEOUT_MS} at least); rejects past it. */
  run<T>(command: () => Promise<T>, { patient = false }: { patient?: boolean } = {}): Promise<T> {
    return withinDeadline(command(), patient ? Math.max(PATIENT_TIMEOUT_MS, this.#options.timeoutMs) : this.#options.timeoutMs);
  }

  close(): void {
    this.client.disconnect();
  }
}

/** What every node connection shares: fail at once while disconnected rather than queue (the request goes on with memory). */
function nodeOptions(options: RedisConnectionOptions): { maxRetriesPerRequest: number; commandTimeout: number; connectTimeout: number } {
  return {
    maxRetriesPerRequest: 0,
    // A backstop only: each call has its own deadline (withinDeadline), patient ones a longer one.
    commandTimeout: Math.max(PATIENT_TIMEOUT_MS, options.timeoutMs),
    connectTimeout: CONNECT_TIMEOUT_MS,
  };
}

function serverClient(options: RedisConnectionOptions): StoreClient {
  const { Redis } = loadIoredis();
  return new Redis(options.urls[0]!, {
    ...nodeOptions(options),
    enableOfflineQueue: false,
    retryStrategy: reconnectDelay,
    scripts: options.scripts,
  }) as StoreClient;
}

/**
 * A Redis Cluster from its seed nodes. Credentials and TLS are the first
 * URL's, for every node (a cluster has one `requirepass`/ACL). A node that
 * went away is reconnected to as one server is, so its slots are used again
 * once it is back.
 */
function clusterClient(options: RedisConnectionOptions): StoreClient {
  const { Cluster } = loadIoredis();
  const seeds: ClusterNode[] = options.urls.map((url) => {
    const parsed = new URL(url);
    return { host: parsed.hostname, port: parsed.port === '' ? 6379 : Number(parsed.port) };
  });
  const first = new URL(options.urls[0]!);
  return new Cluster(seeds, {
    enableOfflineQueue: false,
    clusterRetryStrategy: reconnectDelay,
    clusterNodeRetryStrategy: reconnectDelay,
    // A node that does not answer is a fault now, not after 16 redirections 100 ms apart: the request uses memory.
    maxRedirections: 2,
    retryDelayOnFailover: 50,
    retryDelayOnClusterDown: 50,
    slotsRefreshTimeout: CONNECT_TIMEOUT_MS,
    scripts: options.scripts,
    redisOptions: {
      ...nodeOptions(options),
      ...(first.username === '' ? {} : { username: decodeURIComponent(first.username) }),
      ...(first.password === '' ? {} : { password: decodeURIComponent(first.password) }),
      ...(first.protocol === 'rediss:' ? { tls: {} } : {}),
    },
  }) as StoreClient;
}

/** The work's result, or a rejection once `ms` have passed without it (its late answer is then ignored). */
function withinDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`Command timed out (${ms} ms)`)), ms);
    work.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}
