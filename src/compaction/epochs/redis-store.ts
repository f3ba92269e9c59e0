import { randomUUID } from 'node:crypto';
import type { CompactionLogger } from '../ports.js';
import { type BadValueReason, StoredEpochCodec } from './stored-epoch.js';
import type { MemoryEpochStore } from './epoch-store.js';
import { MemoryFallbackStore, type SharedEpochs, type SharedLease, type SharedLookup, type StoreOperation } from './memory-fallback.js';
import { CONNECT_TIMEOUT_MS, RedisConnection } from './redis-connection.js';
import { RedisKeys } from './redis-keys.js';
import { type Epoch, LEARNING_WEIGHT, type LookupOptions, type SharedReads, type UnsharedMeasures } from '../types.js';

/**
 * Epochs in Redis (≥ 7), Valkey, or a Redis Cluster, shared by every replica,
 * with this process's memory store behind it (memory-fallback.ts: when Redis
 * is down, slow or flushed the replica goes on with what it knows). A command
 * that errs or takes longer than `timeoutMs` is a fault, answered from memory.
 * The connection (one server or a cluster, the first-connection wait, each
 * command's deadline) is redis-connection.ts's.
 *
 * Keys (redis-keys.ts): the encoded epoch (epoch-codec.ts) and the lease (the
 * token of the replica computing it) per prefix hash, a back-off per
 * conversation, a ratio per tenant's model. A lookup is one script over every
 * prefix hash of the history, longest first: one round trip, whatever its
 * length, returning only the epoch in use and the pending one beyond it, and
 * refreshing the TTL of the one used. It also reads the conversation's
 * back-off (set for a minute when its summary failed) and the learned token
 * ratio (each replica sends its measures every few seconds, merged in order
 * into one moving average by a script): in the script on one server, beside
 * it on a cluster, where the ratio lives in another slot.
 *
 * A store is used through `forConversation`: on a cluster the keys of one
 * conversation carry its hash tag, so its scripts run on one node.
 */

// KEYS: the ratio key when ARGV[3] is '1', the back-off key when ARGV[2] counts it, then the history's epoch keys,
// longest prefix first; ARGV[1]: the TTL (ms) an epoch in use gets again when used; ARGV[2]: how many keys come before
// the epoch keys. Returns the epoch in use, the pending one, the ratio ('' when none), the back-off's PTTL (negative
// when none) and the lease of the longest prefix beyond the epoch in use that a replica is summarizing ('' when none).
const LOOKUP_SCRIPT = `
local shared = tonumber(ARGV[2])
local ratio, backoff = '', -2
local next = 1
if ARGV[3] == '1' then
  ratio = redis.call('GET', KEYS[1]) or ''
  next = 2
end
if shared >= next then backoff = redis.call('PTTL', KEYS[next]) end
local pending, running = '', ''
for index = shared + 1, #KEYS do
  local value = redis.call('GET', KEYS[index])
  if value then
    local flag = string.sub(value, 1, 1)
    if flag == 'p' then
      if pending == '' then pending = value end
    else
      if flag == 'u' then redis.call('PEXPIRE', KEYS[index], ARGV[1]) end
      return { value, pending, ratio, backoff, running }
    end
  end
  -- A summary another replica computes for this prefix (its lease: same name, same hash tag, so same slot).
  if running == '' and pending == '' then
    local lease = string.gsub(KEYS[index], 'epoch:([^:]*)$', 'lease:%1')
    if redis.call('EXISTS', lease) == 1 then running = lease end
  end
end
return { '', pending, ratio, backoff, running }`;

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

const SCRIPTS = {
  epochLookup: { lua: LOOKUP_SCRIPT },
  epochLeaseRenew: { lua: RENEW_SCRIPT, numberOfKeys: 1 },
  epochLeaseRelease: { lua: RELEASE_SCRIPT, numberOfKeys: 1 },
  tokenRatioMerge: { lua: RATIO_SCRIPT, numberOfKeys: 1 },
};

export interface RedisEpochStoreOptions {
  /** `redis://[:password@]host:port[/db]` or `rediss://…` (TLS); with `cluster`, one seed node or several. */
  readonly url: string | readonly string[];
  /** A Redis Cluster (ioredis' Cluster): `url` names seed nodes. */
  readonly cluster?: boolean;
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

/** The Redis store with memory behind it: what the configuration's `cache.store: redis` makes. */
export class RedisEpochStore extends MemoryFallbackStore {
  readonly #connection: RedisConnection;

  constructor(options: RedisEpochStoreOptions) {
    const cluster = options.cluster === true;
    const connection = new RedisConnection({ urls: typeof options.url === 'string' ? [options.url] : options.url, cluster, timeoutMs: options.timeoutMs, scripts: SCRIPTS });
    const codec = new StoredEpochCodec({ keyPrefix: options.keyPrefix, secret: options.secret ?? null, maxValueBytes: options.maxValueBytes ?? 33_554_432 });
    const { ttlMs, logger, onBadValue } = options;
    const core: RedisCore = { connection, keys: new RedisKeys(options.keyPrefix, cluster), ttlMs, codec, loggedBadValues: new Set(), logger, onBadValue };
    const epochs = new RedisEpochs(core, '');
    super(epochs, { ...options, name: 'redis' });
    this.#connection = connection;
  }

  /** host:port, for the log lines (never the URL: it may hold a password). */
  get host(): string {
    return this.#connection.host;
  }

  /** Whether it answers, for the start line: waits for the connection (at most `timeoutMs`), then `answered` or why not. */
  async probe(timeoutMs = CONNECT_TIMEOUT_MS): Promise<string> {
    const connection = this.#connection;
    const deadline = Date.now() + timeoutMs;
    while (!connection.ready && connection.lastError === null && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    if (connection.ready) return 'answered';
    return `not answering: ${connection.lastError ?? `no connection within ${timeoutMs} ms`}`;
  }
}

/** What every conversation's view of one store shares. */
interface RedisCore {
  readonly connection: RedisConnection;
  readonly keys: RedisKeys;
  readonly ttlMs: number;
  readonly codec: StoredEpochCodec;
  /** Bad values already logged (see {@link LOGGED_BAD_VALUES}). */
  readonly loggedBadValues: Set<string>;
  readonly logger?: CompactionLogger | undefined;
  readonly onBadValue?: ((reason: BadValueReason) => void) | undefined;
}

/** The Redis commands alone, as one conversation sends them ('' for the store itself): each resolves with Redis's answer or rejects. */
class RedisEpochs implements SharedEpochs {
  readonly #core: RedisCore;
  readonly #conversation: string;

  constructor(core: RedisCore, conversation: string) {
    this.#core = core;
    this.#conversation = conversation;
  }

  whyNotReady(): string {
    const { host, lastError } = this.#core.connection;
    return `not connected to ${host}${lastError === null ? '' : `: ${lastError}`}`;
  }

  forConversation(conversation: string): RedisEpochs {
    return new RedisEpochs(this.#core, conversation);
  }

  get ready(): boolean {
    return this.#core.connection.ready;
  }

  onReady(listener: () => void): void {
    this.#core.connection.onReady(listener);
  }

  firstConnection(): Promise<void> {
    return this.#core.connection.firstConnection();
  }

  async lookup(hashes: readonly string[], shared?: SharedReads, { patient = false }: LookupOptions = {}): Promise<SharedLookup> {
    const { keys, connection, ttlMs } = this.#core;
    const scriptKeys: string[] = [];
    const ratioInScript = shared !== undefined && keys.ratioInScript;
    if (ratioInScript) scriptKeys.push(keys.ratio(shared.ratio));
    if (shared !== undefined) scriptKeys.push(keys.backoff(shared.conversation));
    const sharedKeys = scriptKeys.length;
    for (let index = hashes.length - 1; index > 0; index--) scriptKeys.push(keys.epoch(this.#conversation, hashes[index]!));
    const client = connection.client;
    const script = connection.run(() => client.epochLookupBuffer(scriptKeys.length, ...scriptKeys, ttlMs, sharedKeys, ratioInScript ? '1' : '0'), { patient });
    // On a cluster the ratio is in another slot: read at the same time, so still one round trip.
    const beside = shared === undefined || ratioInScript ? undefined : connection.run(() => client.getBuffer(keys.ratio(shared.ratio)), { patient });
    const [reply, ratioBeside] = await Promise.all([script, beside]);
    const ratioText = ratioInScript ? reply[2] : (ratioBeside ?? Buffer.alloc(0));
    const ratio = ratioText.length === 0 ? undefined : Number(ratioText.toString());
    const state = shared === undefined ? {} : { shared: { ratio: Number.isFinite(ratio) ? ratio : undefined, backoffMs: Math.max(0, reply[3]) } };
    const running = reply[4].toString();
    return {
      inUse: reply[0].length === 0 ? undefined : this.#decode(reply[0]),
      pending: reply[1].length === 0 ? undefined : this.#decode(reply[1]),
      ...state,
      ...(running === '' ? {} : { runningElsewhere: running }),
    };
  }

  async shareRatio({ name, samples }: UnsharedMeasures): Promise<void> {
    const { keys, connection, ttlMs } = this.#core;
    await connection.run(() => connection.client.tokenRatioMerge(keys.ratio(name), LEARNING_WEIGHT, ttlMs, ...samples));
  }

  async noteFailure(conversation: string, ms: number): Promise<void> {
    const { keys, connection } = this.#core;
    await connection.run(() => connection.client.set(keys.backoff(conversation), '1', 'PX', ms));
  }

  async clearFailure(conversation: string): Promise<void> {
    const { keys, connection } = this.#core;
    await connection.run(() => connection.client.del(keys.backoff(conversation)));
  }

  async load(key: string): Promise<Epoch | undefined> {
    const { keys, connection } = this.#core;
    const value = await connection.run(() => connection.client.getBuffer(keys.epoch(this.#conversation, key)));
    const epoch = value === null ? undefined : this.#decode(value);
    return epoch?.key === key ? epoch : undefined;
  }

  /** A stored value as an epoch, or undefined (a miss) when it is not a valid one: counted, and logged once per value. */
  #decode(value: Buffer): Epoch | undefined {
    const { codec, loggedBadValues, logger, onBadValue } = this.#core;
    const decoded = codec.decode(value);
    if ('epoch' in decoded) return decoded.epoch;
    onBadValue?.(decoded.bad);
    const fingerprint = `${decoded.bad}:${value.length}:${value.subarray(0, 64).toString('base64')}`;
    if (!loggedBadValues.has(fingerprint) && loggedBadValues.size < LOGGED_BAD_VALUES) {
      loggedBadValues.add(fingerprint);
      logger?.warn({ reason: decoded.bad, detail: decoded.detail, bytes: value.length }, 'epoch store: a stored value is not a valid epoch; treated as a miss');
    }
    return undefined;
  }

  async save(epoch: Epoch, ttlMs: number): Promise<void> {
    const { keys, connection, codec } = this.#core;
    await connection.run(() => connection.client.set(keys.epoch(this.#conversation, epoch.key), codec.encode(epoch), 'PX', Math.ceil(ttlMs)));
  }

  async lease(key: string, ttlMs: number): Promise<SharedLease | null> {
    const { keys, connection } = this.#core;
    const leaseKey = keys.lease(this.#conversation, key);
    const token = randomUUID();
    if ((await connection.run(() => connection.client.set(leaseKey, token, 'PX', ttlMs, 'NX'))) === null) return null;
    return {
      renew: async () => (await connection.run(() => connection.client.epochLeaseRenew(leaseKey, token, ttlMs))) !== 0,
      release: async () => {
        await connection.run(() => connection.client.epochLeaseRelease(leaseKey, token));
      },
    };
  }

  async close(): Promise<void> {
    this.#core.connection.close();
  }
}
