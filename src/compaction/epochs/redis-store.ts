import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import type { Redis as RedisClient } from 'ioredis';

// ioredis is loaded only when a Redis store is configured: the default memory store starts ~90 ms sooner
// without it (measured: `node -e "import('ioredis')"` 0.20 s against node alone 0.11 s).
const loadIoredis = (): typeof import('ioredis') => createRequire(import.meta.url)('ioredis') as typeof import('ioredis');
import type { CompactionLogger } from '../epoch-writer.js';
import { decodeEpoch, encodeEpoch } from './epoch-codec.js';
import { LEARNING_WEIGHT, type UnsharedMeasures } from '../token-ratio.js';
import type { Epoch, EpochLease, EpochLookup, EpochStore, MemoryEpochStore, SharedReads } from './epoch-store.js';

/**
 * Epochs in Redis (≥ 7) or Valkey, shared by every replica, with this
 * process's memory store behind it: every epoch saved or found is kept there
 * too, so when Redis is down, slow or flushed the replica goes on with what
 * it knows (warned once per outage, counted), and a conversation it served
 * keeps its forwarded prefix. No call ever fails a request: a command that
 * errs or takes longer than `timeoutMs` is answered from memory.
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
 *
 * Over 200 lines: the scripts sit with the calls that run them.
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

type StoreOperation = 'lookup' | 'load' | 'save' | 'lease' | 'ratio' | 'backoff';

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
}

interface ScriptedRedis extends RedisClient {
  epochLookupBuffer(...args: Array<string | number>): Promise<[Buffer, Buffer, Buffer, number]>;
  tokenRatioMerge(key: string, ...args: Array<string | number>): Promise<number>;
  epochLeaseRenew(key: string, token: string, ttlMs: number): Promise<number>;
  epochLeaseRelease(key: string, token: string): Promise<number>;
}

export class RedisEpochStore implements EpochStore {
  readonly #redis: ScriptedRedis;
  readonly #memory: MemoryEpochStore;
  readonly #options: RedisEpochStoreOptions;
  readonly #now: () => number;
  /** Whether the last command failed: the outage is warned once, and its end said once. */
  #faulty = false;

  constructor(options: RedisEpochStoreOptions) {
    this.#options = options;
    this.#memory = options.memory;
    this.#now = options.now ?? Date.now;
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
    this.#redis.on('error', () => undefined);
    this.#redis.on('ready', () => this.#recovered());
  }

  /** Epochs held in this process's memory (Redis counts its own: `DBSIZE`). */
  get size(): number {
    return this.#memory.size;
  }

  get bytes(): number {
    return this.#memory.bytes;
  }

  /** Whether the replica is working from memory now (Redis down, or its last command failed). */
  get degraded(): boolean {
    return this.#faulty || this.#redis.status !== 'ready';
  }

  async lookup(hashes: readonly string[], shared?: SharedReads): Promise<EpochLookup> {
    const local = await this.#memory.lookup(hashes);
    const keys: string[] = shared === undefined ? [] : [this.#ratioKey(shared.ratio), this.#backoffKey(shared.conversation)];
    const sharedKeys = keys.length;
    for (let index = hashes.length - 1; index > 0; index--) keys.push(this.#epochKey(hashes[index]!));
    const reply = await this.#call('lookup', () => this.#redis.epochLookupBuffer(keys.length, ...keys, this.#options.ttlMs, sharedKeys));
    if (reply === undefined) return local;
    const ratio = reply[2].length === 0 ? undefined : Number(reply[2].toString());
    const state = shared === undefined ? {} : { shared: { ratio: Number.isFinite(ratio) ? ratio : undefined, backoffMs: Math.max(0, reply[3]) } };
    const matches = (epoch: Epoch | undefined): epoch is Epoch => epoch !== undefined && hashes[epoch.seenLength] === epoch.key;
    const found = reply[0].length === 0 ? undefined : decodeEpoch(reply[0]);
    const pendingFound = reply[1].length === 0 ? undefined : decodeEpoch(reply[1]);
    let inUse = matches(found) ? found : null;
    // Memory knows a longer one: Redis was flushed or restarted empty. It is written back, so other replicas find it again.
    if (local.inUse !== null && (inUse === null || local.inUse.seenLength > inUse.seenLength)) {
      inUse = local.inUse;
      void this.save(inUse);
    } else if (inUse !== null) {
      this.#memory.set(inUse);
    }
    const pending = matches(pendingFound) && pendingFound.sourceLength > (inUse?.sourceLength ?? 0) ? pendingFound : local.pending;
    return { inUse, pending, ...state };
  }

  async shareRatios(measures: readonly UnsharedMeasures[]): Promise<void> {
    // Sent together: ioredis writes them to the socket in one go, one round trip for all.
    await Promise.all(
      measures.map(({ name, samples }) =>
        this.#call('ratio', () => this.#redis.tokenRatioMerge(this.#ratioKey(name), LEARNING_WEIGHT, this.#options.ttlMs, ...samples)),
      ),
    );
  }

  async noteFailure(conversation: string, ms: number): Promise<void> {
    await this.#call('backoff', () => this.#redis.set(this.#backoffKey(conversation), '1', 'PX', ms));
  }

  async load(key: string): Promise<Epoch | undefined> {
    const value = await this.#call('load', () => this.#redis.getBuffer(this.#epochKey(key)));
    const epoch = value === undefined || value === null ? undefined : decodeEpoch(value);
    return epoch ?? this.#memory.get(key);
  }

  async save(epoch: Epoch): Promise<void> {
    this.#memory.set(epoch);
    const ttl = epoch.expiresAt === undefined ? this.#options.ttlMs : Math.min(this.#options.ttlMs, epoch.expiresAt - this.#now());
    if (ttl <= 0) return;
    await this.#call('save', () => this.#redis.set(this.#epochKey(epoch.key), encodeEpoch(epoch), 'PX', Math.ceil(ttl)));
  }

  async lease(key: string, ttlMs: number): Promise<EpochLease | null> {
    const leaseKey = `${this.#options.keyPrefix}lease:${key}`;
    const token = randomUUID();
    const taken = await this.#call('lease', () => this.#redis.set(leaseKey, token, 'PX', ttlMs, 'NX'));
    // Redis unreachable: this replica computes on its own (its single flight still joins its own callers).
    if (taken === undefined) return { renew: async () => true, release: async () => undefined };
    if (taken === null) return null;
    return {
      renew: async () => (await this.#call('lease', () => this.#redis.epochLeaseRenew(leaseKey, token, ttlMs))) !== 0,
      release: async () => {
        await this.#call('lease', () => this.#redis.epochLeaseRelease(leaseKey, token));
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

  /** Runs one command; undefined when it failed or timed out (counted, the outage warned once). */
  async #call<T>(operation: StoreOperation, command: () => Promise<T>): Promise<T | undefined> {
    if (this.#redis.status !== 'ready') {
      this.#fault(operation, 'not connected');
      return undefined;
    }
    try {
      const result = await command();
      if (this.#faulty) this.#recovered();
      return result;
    } catch (error) {
      this.#fault(operation, error instanceof Error ? error.message : String(error));
      return undefined;
    }
  }

  #fault(operation: StoreOperation, reason: string): void {
    this.#options.onFault?.(operation);
    if (this.#faulty) return;
    this.#faulty = true;
    this.#options.logger?.warn({ store: 'redis', operation, reason }, 'epoch store unavailable: using this replica\'s memory until it is back');
  }

  #recovered(): void {
    if (!this.#faulty) return;
    this.#faulty = false;
    this.#options.logger?.info({ store: 'redis' }, 'epoch store back: epochs are shared again');
  }
}

