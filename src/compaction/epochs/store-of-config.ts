import type { Config } from '../../config/schema.js';
import type { CompactionLogger } from '../ports.js';
import { MemoryEpochStore } from './epoch-store.js';
import type { EpochStore } from '../types.js';
import { RedisEpochStore } from './redis-store.js';

/** The epoch store `cache.store` names, with what the app needs of it beyond the engine's calls. */
export interface ConfiguredStore {
  readonly store: EpochStore;
  /** `memory`, `redis`, or `redis (degraded: memory)` while Redis is down: for /readyz. */
  state(): string;
  /** For the start line: `memory`, or `redis HOST:PORT (answered)` / `(not answering: connect ECONNREFUSED …)`. */
  describe(): Promise<string>;
  close(): Promise<void>;
}

export interface StoreOfConfigOptions {
  readonly logger?: CompactionLogger | undefined;
  readonly onFault?: ((operation: string) => void) | undefined;
  /** Told of each stored value that was not a valid epoch. */
  readonly onBadValue?: ((reason: string) => void) | undefined;
  readonly now?: () => number;
}

export function epochStoreOf(config: Config, options: StoreOfConfigOptions = {}): ConfiguredStore {
  const { cache } = config;
  const memory = new MemoryEpochStore({ maxEntries: cache.max_entries, maxBytes: cache.max_bytes, ttlMs: cache.ttl_s * 1000, ...(options.now === undefined ? {} : { now: options.now }) });
  if (cache.store === 'memory' || cache.redis.url === null) return { store: memory, state: () => 'memory', describe: async () => 'memory', close: async () => undefined };
  const redis = new RedisEpochStore({
    url: cache.redis.url,
    keyPrefix: cache.redis.key_prefix,
    ttlMs: cache.ttl_s * 1000,
    timeoutMs: cache.redis.timeout_ms,
    memory,
    logger: options.logger,
    onFault: options.onFault,
    onBadValue: options.onBadValue,
    secret: cache.redis.secret,
    maxValueBytes: cache.redis.max_value_bytes,
    ...(options.now === undefined ? {} : { now: options.now }),
  });
  return {
    store: redis,
    state: () => (redis.degraded ? 'redis (degraded: memory)' : 'redis'),
    describe: async () => `redis ${redis.host} (${await redis.probe()})`,
    close: () => redis.close(),
  };
}
