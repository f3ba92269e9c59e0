import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import type { Redis as RedisClient } from 'ioredis';

// ioredis is loaded only when a Redis store is configured: the default memory store starts ~90 ms sooner
// without it (measured: `node -e "import('ioredis')"` 0.20 s against node alone 0.11 s).
const loadIoredis = (): typeof import('ioredis') => createRequire(import.meta.url)('ioredis') as typeof import('ioredis');
import type { CompactionLogger } from '../ports.js';
import { type BadValueReason, StoredEpochCodec } from './stored-epoch.js';
import type { MemoryEpochStore } from './epoch-store.js';
import { MemoryFallbackStore, type SharedEpochs, type SharedLease, type SharedLookup, type StoreOperation } from './memory-fallback.js';
import { type Epoch, LEARNING_WEIGHT, type SharedReads, type UnsharedMeasures } from '../types.js';

/**
 * Epochs in Redis (≥ 7) or Valkey, shared by every replica, with this
 * process's memory store behind it (memory-fallback.ts: when Redis is down,
 * slow or flushed the replica goes on with what it knows). A command that
 * errs or takes longer than `timeoutMs` is a fault, answered from memory.
 *
 * Keys: `<prefix>epoch:<prefix hash>` (the encoded epoch, see epoch-codec.ts)
 * and `<prefix>lease:<prefix hash>` (the token of the replica computing it).
 * A lookup is one script over every prefix hash of the history, longest
 * first: one round trip, whatever its length, returning only the epoch in
 * use and the pending one beyond it, and refreshing the TTL of the one used.
 *
 * Shared with the epochs, read in that same script: `<prefix>ratio:<tenant
 * NUL model>` (the learned token ratio: each replica sends its measures every
 * few seconds, merged in order into one moving average by a script) and
 * `<prefix>backoff:<conversation>` (set for a minute when its summary failed).
 */

// KEYS: the ratio and back-off keys when ARGV[2] is 2, then the history's epoch keys, longest prefix first;
// ARGV[1]: the TTL (ms) an epoch in use gets again when used. Returns the epoch in use, the pending one, the
// shared ratio ('' when none) and the back-off's PTTL (negative when none).
const LOOKUP_SCRIPT = `
local shared = tonumber(ARGV[2])
local ratio, backoff = '', -2
if shared == 2 then
  ratio = redis.call('GET', KEYS[1]) or ''
  backoff = redis.call('PTTL', KEYS[2])
end
local pending = ''
for index = shared + 1, #KEYS do
  local value = redis.call('GET', KEYS[index])
  if value then
    local flag = string.sub(value, 1, 1)
    if flag == 'p' then
      if pending == '' then pending = value end
    else
      if flag == 'u' then redis.call('PEXPIRE', KEYS[index], ARGV[1]) end
      return { value, pending, ratio, backoff }
    end
  end
end
return { '', pending, ratio, backoff }`;

// KEYS[1]: a ratio; ARGV[1]: the weight of a measure, ARGV[2]: the TTL (ms), ARGV[3…]: one replica's measures in
// order. The same moving average as token-ratio.ts, over every replica's measures in the order they arrive.
const RATIO_SCRIPT = `
local value = tonumber(redis.call('GET', KEYS[1]))
local weight = tonumber(ARGV[1])
for index = 3, #ARGV do
  local sample = tonumber(ARGV[index])
  if value == nil then value = sample else value = value + weight * (sample - value) end
end
if value ~= nil then redis.call('SET', KEYS[1], tostring(value), 'PX', ARGV[2]) end
return 1`;

// Only the holder (its token) extends or ends a lease: one that expired and was taken by another replica stays theirs.
const RENEW_SCRIPT = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`;
const RELEASE_SCRIPT = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;

/**
 * Reconnection back-off: quick at first (a restart takes a second or two),
 * never slower than every 2 s, so a replica is back on Redis within 2 s of
 * its return.
 */
const RECONNECT_MAX_MS = 2_000;

/** A connection attempt that takes longer than this has failed: requests meanwhile use memory anyway. */
const CONNECT_TIMEOUT_MS = 2_000;

export interface RedisEpochStoreOptions {
  /** `redis://[:password@]host:port[/db]` or `rediss://…` (TLS). */
  readonly url: string;
  readonly keyPrefix: string;
  /** The TTL of an epoch, refreshed each time it is used. */
  readonly ttlMs: number;
  /** A command slower than this counts as a fault: the request goes on with memory. */
  readonly timeoutMs: number;
  readonly memory: MemoryEpochStore;
  readonly logger?: CompactionLogger | undefined;
  /** Told of each command that failed (the metrics). */
  readonly onFault?: ((operation: StoreOperation) => void) | undefined;
  readonly now?: () => number;
  /** `cache.redis.secret`: values are signed, and one that does not verify is a miss (stored-epoch.ts). */
  readonly secret?: string | null | undefined;
  /** `cache.redis.max_value_bytes`: a value larger than this once inflated is a miss. */
  readonly maxValueBytes?: number | undefined;
  /** Told of each stored value that was not a valid epoch (the metrics). */
  readonly onBadValue?: ((reason: BadValueReason) => void) | undefined;
}

/** Bad values named in the log, remembered so each is logged once (bounded: a flood of them logs at most this many). */
const LOGGED_BAD_VALUES = 1_000;

interface ScriptedRedis extends RedisClient {
  epochLookupBuffer(...args: Array<string | number>): Promise<[Buffer, Buffer, Buffer, number]>;
  tokenRatioMerge(key: string, ...args: Array<string | number>): Promise<number>;
  epochLeaseRenew(key: string, token: string, ttlMs: number): Promise<number>;
  epochLeaseRelease(key: string, token: string): Promise<number>;
}

/** The Redis store with memory behind it: what the configuration's `cache.store: redis` makes. */
export class RedisEpochStore extends MemoryFallbackStore {
  readonly #epochs: RedisEpochs;

  constructor(options: RedisEpochStoreOptions) {
    const epochs = new RedisEpochs(options);
    super(epochs, { ...options, name: 'redis' });
    this.#epochs = epochs;
  }

  /** host:port, for the log lines (never the URL: it may hold a password). */
  get host(): string {
    return this.#epochs.host;
  }

  /** Whether it answers, for the start line: waits for the connection (at most `timeoutMs`), then `answered` or why not. */
  async probe(timeoutMs = CONNECT_TIMEOUT_MS): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    while (!this.#epochs.ready && this.#epochs.lastError === null && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    if (this.#epochs.ready) return 'answered';
    return `not answering: ${this.#epochs.lastError ?? `no connection within ${timeoutMs} ms`}`;
  }
}

/** The Redis commands alone: each resolves with Redis's answer or rejects. */
class RedisEpochs implements SharedEpochs {
  readonly #redis: ScriptedRedis;
  readonly #options: RedisEpochStoreOptions;
  readonly #codec: StoredEpochCodec;
  readonly #loggedBadValues = new Set<string>();
  readonly host: string;
  /** The connection's last error (`connect ECONNREFUSED 127.0.0.1:6379`): what a command refused while disconnected is told. */
  lastError: string | null = null;

  constructor(options: RedisEpochStoreOptions) {
    this.#options = options;
    this.#codec = new StoredEpochCodec({ keyPrefix: options.keyPrefix, secret: options.secret ?? null, maxValueBytes: options.maxValueBytes ?? 33_554_432 });
    const parsed = new URL(options.url);
    this.host = `${parsed.hostname}:${parsed.port === '' ? '6379' : parsed.port}`;
    const { Redis } = loadIoredis();
    this.#redis = new Redis(options.url, {
      // Fail at once while disconnected rather than queue: the request goes on with memory.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: options.timeoutMs,
      connectTimeout: CONNECT_TIMEOUT_MS,
      retryStrategy: (times) => Math.min(50 * 2 ** times, RECONNECT_MAX_MS),
      // Scripts are sent with EVALSHA, and re-sent whole when the server lost them (a restart, SCRIPT FLUSH).
      scripts: {
        epochLookup: { lua: LOOKUP_SCRIPT },
        epochLeaseRenew: { lua: RENEW_SCRIPT, numberOfKeys: 1 },
        epochLeaseRelease: { lua: RELEASE_SCRIPT, numberOfKeys: 1 },
        tokenRatioMerge: { lua: RATIO_SCRIPT, numberOfKeys: 1 },
      },
    }) as ScriptedRedis;
    // Without a listener an unreachable server would be an unhandled 'error' event; faults are reported per command.
    this.#redis.on('error', (error: Error) => {
      this.lastError = error.message;
    });
  }

  whyNotReady(): string {
    return `not connected to ${this.host}${this.lastError === null ? '' : `: ${this.lastError}`}`;
  }

  get ready(): boolean {
    return this.#redis.status === 'ready';
  }

  onReady(listener: () => void): void {
    this.#redis.on('ready', listener);
  }

  async lookup(hashes: readonly string[], shared?: SharedReads): Promise<SharedLookup> {
    const keys: string[] = shared === undefined ? [] : [this.#ratioKey(shared.ratio), this.#backoffKey(shared.conversation)];
    const sharedKeys = keys.length;
    for (let index = hashes.length - 1; index > 0; index--) keys.push(this.#epochKey(hashes[index]!));
    const reply = await this.#redis.epochLookupBuffer(keys.length, ...keys, this.#options.ttlMs, sharedKeys);
    const ratio = reply[2].length === 0 ? undefined : Number(reply[2].toString());
    const state = shared === undefined ? {} : { shared: { ratio: Number.isFinite(ratio) ? ratio : undefined, backoffMs: Math.max(0, reply[3]) } };
    return {
      inUse: reply[0].length === 0 ? undefined : this.#decode(reply[0]),
      pending: reply[1].length === 0 ? undefined : this.#decode(reply[1]),
      ...state,
    };
  }

  async shareRatio({ name, samples }: UnsharedMeasures): Promise<void> {
    await this.#redis.tokenRatioMerge(this.#ratioKey(name), LEARNING_WEIGHT, this.#options.ttlMs, ...samples);
  }

  async noteFailure(conversation: string, ms: number): Promise<void> {
    await this.#redis.set(this.#backoffKey(conversation), '1', 'PX', ms);
  }

  async load(key: string): Promise<Epoch | undefined> {
    const value = await this.#redis.getBuffer(this.#epochKey(key));
    const epoch = value === null ? undefined : this.#decode(value);
    return epoch?.key === key ? epoch : undefined;
  }

  /** A stored value as an epoch, or undefined (a miss) when it is not a valid one: counted, and logged once per value. */
  #decode(value: Buffer): Epoch | undefined {
    const decoded = this.#codec.decode(value);
    if ('epoch' in decoded) return decoded.epoch;
    this.#options.onBadValue?.(decoded.bad);
    const fingerprint = `${decoded.bad}:${value.length}:${value.subarray(0, 64).toString('base64')}`;
    if (!this.#loggedBadValues.has(fingerprint) && this.#loggedBadValues.size < LOGGED_BAD_VALUES) {
      this.#loggedBadValues.add(fingerprint);
      this.#options.logger?.warn({ reason: decoded.bad, detail: decoded.detail, bytes: value.length }, 'epoch store: a stored value is not a valid epoch; treated as a miss');
    }
    return undefined;
  }

  async save(epoch: Epoch, ttlMs: number): Promise<void> {
    await this.#redis.set(this.#epochKey(epoch.key), this.#codec.encode(epoch), 'PX', Math.ceil(ttlMs));
  }

  async lease(key: string, ttlMs: number): Promise<SharedLease | null> {
    const leaseKey = `${this.#options.keyPrefix}lease:${key}`;
    const token = randomUUID();
    if ((await this.#redis.set(leaseKey, token, 'PX', ttlMs, 'NX')) === null) return null;
    return {
      renew: async () => (await this.#redis.epochLeaseRenew(leaseKey, token, ttlMs)) !== 0,
      release: async () => {
        await this.#redis.epochLeaseRelease(leaseKey, token);
      },
    };
  }

  async close(): Promise<void> {
    this.#redis.disconnect();
  }

  #ratioKey(name: string): string {
    return `${this.#options.keyPrefix}ratio:${name}`;
  }

  #backoffKey(conversation: string): string {
    return `${this.#options.keyPrefix}backoff:${conversation}`;
  }

  #epochKey(hash: string): string {
    return `${this.#options.keyPrefix}epoch:${hash}`;
  }
}
