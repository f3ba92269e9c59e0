import { createRequire } from 'node:module';
import type { Config } from '../config/schema.js';
import { maskUrl } from '../config/mask.js';
import type { StoreAnswer } from './check.js';

// Loaded only when a Redis store is configured, as the proxy does (src/compaction/epochs/redis-store.ts).
const loadIoredis = (): typeof import('ioredis') => createRequire(import.meta.url)('ioredis') as typeof import('ioredis');

/** A person waits for the doctor's lines: a Redis that has not answered by then is down for this purpose. */
const STORE_TIMEOUT_MS = 2_000;

/** The server and version `INFO server` names: Valkey says `valkey_version` beside its Redis-compatible one. */
export function serverOf(info: string): { server: 'Redis' | 'Valkey'; version: string } {
  const field = (name: string): string | undefined => new RegExp(`^${name}:(\\S+)`, 'm').exec(info)?.[1];
  const valkey = field('valkey_version');
  if (valkey !== undefined) return { server: 'Valkey', version: valkey };
  return { server: 'Redis', version: field('redis_version') ?? 'unknown' };
}

/** Asks the configured store: nothing for memory; for Redis, a connection, PING and INFO server. Never throws. */
export async function probeStore(config: Config): Promise<StoreAnswer> {
  const url = config.cache.redis.url;
  if (config.cache.store !== 'redis' || url === null) return { kind: 'memory' };
  const shown = maskUrl(url) ?? url;
  const { Redis } = loadIoredis();
  const client = new Redis(url, {
    lazyConnect: true,
    connectTimeout: STORE_TIMEOUT_MS,
    commandTimeout: STORE_TIMEOUT_MS,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  // The socket's own error says why (ECONNREFUSED, a DNS failure); the promise only says the connection closed.
  // Listened to, ioredis also does not print it.
  let cause: string | undefined;
  client.on('error', (error: Error) => (cause ??= error.message));
  try {
    await client.connect();
    await client.ping();
    return { kind: 'redis', url: shown, ...serverOf(await client.info('server')) };
  } catch (error) {
    return { kind: 'redis unreachable', url: shown, reason: cause ?? (error instanceof Error ? error.message : String(error)) };
  } finally {
    client.disconnect();
  }
}
