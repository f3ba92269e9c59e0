import type { Config } from '../../config/schema.js';
import type { CompactionLogger } from '../ports.js';
import type { BadValueReason } from './bad-values.js';
import { MemoryEpochStore } from './epoch-store.js';
import { RedisEpochStore } from './redis-store.js';
import { EpochRepository } from './repository.js';
import type { StoreOperation } from './store-health.js';

/** The epochs repository `cache.store` names, with what the app needs of it beyond the engine's calls. */
export interface ConfiguredStore {
  readonly store: EpochRepository;
  /** `memory`, `redis`, or `redis (degraded: memory)` while Redis is down: for /readyz. */
  state(): string;
  /** For the start line: `memory`, or `redis HOST:PORT (answered)` / `(not answering: connect ECONNREFUSED …)`. */
  describe(): Promise<string>;
  close(): Promise<void>;
}

export interface StoreOfConfigOptions {
  readonly logger?: CompactionLogger | undefined;
  readonly onFault?: ((operation: StoreOperation) => void) | undefined;
  /** Told of each stored value that was not valid (an epoch, a ratio, a back-off). */
  readonly onBadValue?: ((reason: BadValueReason) => void) | undefined;
  readonly now?: () => number;
}

/**
 * Every shared store, by its `cache.store` name: adding one is a file that
 * implements `SharedStore` (shared-store.ts), and `SharedLearning`
 * (learning.ts) when it shares ratios and back-offs, and its line here
 * (DESIGN.md § How to add a store).
 */
const SHARED_STORES: Record<Exclude<Config['cache']['store'], 'memory'>, (config: Config, memory: MemoryEpochStore, options: StoreOfConfigOptions) => ConfiguredStore | null> = {
  redis: redisOf,
};

export function epochStoreOf(config: Config, options: StoreOfConfigOptions = {}): ConfiguredStore {
  const { cache } = config;
  const memory = new MemoryEpochStore({ maxEntries: cache.max_entries, maxBytes: cache.max_bytes, ttlMs: cache.ttl_s * 1000, ...(options.now === undefined ? {} : { now: options.now }) });
  const shared = cache.store === 'memory' ? null : SHARED_STORES[cache.store](config, memory, options);
  return shared ?? { store: EpochRepository.inMemory(memory), state: () => 'memory', describe: async () => 'memory', close: async () => undefined };
}

function redisOf(config: Config, memory: MemoryEpochStore, options: StoreOfConfigOptions): ConfiguredStore | null {
  const { cache } = config;
  if (cache.redis.url === null) return null;
  const redis = new RedisEpochStore({
    url: cache.redis.url,
    cluster: cache.redis.cluster,
    keyPrefix: cache.redis.key_prefix,
    ttlMs: cache.ttl_s * 1000,
    timeoutMs: cache.redis.timeout_ms,
    memory,
    logger: options.logger,
    onFault: options.onFault,
    onBadValue: options.onBadValue,
    secret: cache.redis.secret,
    keySalt: cache.redis.key_salt,
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
