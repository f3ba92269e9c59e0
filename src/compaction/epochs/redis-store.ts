import { randomUUID } from 'node:crypto';
import type { CompactionLogger } from '../ports.js';
import type { Epoch, LookupOptions } from '../types.js';
import { type BadValueReason, BadValues } from './bad-values.js';
import { MAX_VALUE_BYTES } from './epoch-codec.js';
import type { MemoryEpochStore } from './epoch-store.js';
import { CONNECT_TIMEOUT_MS, RedisConnection } from './redis-connection.js';
import { keySaltOf, RedisKeys } from './redis-keys.js';
import { LEARNING_SCRIPTS, RedisLearning } from './redis-learning.js';
import { EpochRepository } from './repository.js';
import type { SharedLease, SharedLookup, SharedStore } from './shared-store.js';
import { ValueSigner } from './signed-value.js';
import { StoreHealth, type StoreOperation } from './store-health.js';
import { StoredEpochCodec } from './stored-epoch.js';

/**
 * Epochs in Redis (≥ 7), Valkey, or a Redis Cluster, shared by every replica,
 * with this process's memory store behind it (repository.ts: when Redis is
 * down, slow or flushed the replica goes on with what it knows). A command
 * that errs or takes longer than `timeoutMs` is a fault, answered from memory.
 * The connection (one server or a cluster, the first-connection wait, each
 * command's deadline) is redis-connection.ts's.
 *
 * Keys (redis-keys.ts): the encoded epoch (epoch-codec.ts, signed with a
 * secret: stored-epoch.ts) and the lease (the token of the replica computing
 * it) per prefix hash. A lookup is one script over every prefix hash of the
 * history, longest first: one round trip, whatever its length. The script
 * only finds: it sends the values it met down to the first one in use
 * (refreshing that one's TTL), and which epoch counts is decided by the rules
 * of lookup.ts, as for the memory store. The ratios and back-offs replicas
 * share are redis-learning.ts's, read beside the lookup.
 *
 * A store is used through `forConversation`: on a cluster the keys of one
 * conversation carry its hash tag, so its scripts run on one node.
 */

// KEYS: the history's epoch keys, longest prefix first; ARGV[1]: the TTL (ms) an epoch in use gets again when used;
// ARGV[2]: the prefix length KEYS[1] names. Returns the values met, each after its prefix length, down to the first in use
// (flag 'u' or 'f'), that one's prefix length (0 when there was none), and the lease of the longest prefix beyond the
// epoch in use that a replica is summarizing ('' when none, or when a pending epoch was met first).
const LOOKUP_SCRIPT = `
local top = tonumber(ARGV[2])
local found, running = {}, ''
for index = 1, #KEYS do
  local value = redis.call('GET', KEYS[index])
  if value then
    local at = top - index + 1
    found[#found + 1] = at
    found[#found + 1] = value
    local flag = string.sub(value, 1, 1)
    if flag ~= 'p' then
      if flag == 'u' then redis.call('PEXPIRE', KEYS[index], ARGV[1]) end
      return { found, at, running }
    end
  end
  -- A summary another replica computes for this prefix (its lease: same name, same hash tag, so same slot).
  if running == '' and #found == 0 then
    local lease = string.gsub(KEYS[index], 'epoch:([^:]*)$', 'lease:%1')
    if redis.call('EXISTS', lease) == 1 then running = lease end
  end
end
return { found, 0, running }`;

// Only the holder (its token) extends or ends a lease: one that expired and was taken by another replica stays theirs.
/** A lease's renewal and release, each only by the holder of its token (the fleet's slot leases use them too: fleet/routing-store.ts). */
export const RENEW_SCRIPT = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`;
export const RELEASE_SCRIPT = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;

/** The lookup script as written, for the test that holds it to the rules of lookup.ts (test/compaction/epochs/lookup-table.test.ts). */
export const EPOCH_LOOKUP_SCRIPT = LOOKUP_SCRIPT;

const SCRIPTS = {
  epochLookup: { lua: LOOKUP_SCRIPT },
  epochLeaseRenew: { lua: RENEW_SCRIPT, numberOfKeys: 1 },
  epochLeaseRelease: { lua: RELEASE_SCRIPT, numberOfKeys: 1 },
  ...LEARNING_SCRIPTS,
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
  /** `cache.redis.secret`: every value is signed, and one that does not verify is a miss (stored-epoch.ts, signed-value.ts). */
  readonly secret?: string | null | undefined;
  /** `cache.redis.key_salt`: keys the tenants in key names (else a salt derived from the secret: redis-keys.ts). */
  readonly keySalt?: string | null | undefined;
  /** `cache.redis.max_value_bytes`: a value larger than this once inflated is a miss. */
  readonly maxValueBytes?: number | undefined;
  /** Told of each stored value that was not valid (the metrics). */
  readonly onBadValue?: ((reason: BadValueReason) => void) | undefined;
}

/** The Redis store with memory behind it: what the configuration's `cache.store: redis` makes. */
export class RedisEpochStore extends EpochRepository {
  readonly #connection: RedisConnection;

  constructor(options: RedisEpochStoreOptions) {
    const cluster = options.cluster === true;
    const connection = new RedisConnection({ urls: typeof options.url === 'string' ? [options.url] : options.url, cluster, timeoutMs: options.timeoutMs, scripts: SCRIPTS });
    const secret = options.secret ?? null;
    const codec = new StoredEpochCodec({ keyPrefix: options.keyPrefix, secret, maxValueBytes: options.maxValueBytes ?? MAX_VALUE_BYTES });
    const keys = new RedisKeys(options.keyPrefix, cluster, keySaltOf(secret, options.keySalt ?? null));
    const badValues = new BadValues(options.logger, options.onBadValue);
    const core: RedisCore = { connection, keys, ttlMs: options.ttlMs, codec, badValues };
    const epochs = new RedisEpochs(core, '');
    const name = 'redis';
    // One health for the epochs and the learning: an outage is warned once, whichever command met it.
    const health = new StoreHealth(epochs, { logger: options.logger, onFault: options.onFault, name });
    const learning = new RedisLearning({ connection, keys, signer: new ValueSigner(secret), badValues, ttlMs: options.ttlMs, ...(options.now === undefined ? {} : { now: options.now }) });
    super(epochs, { ...options, name, learning: learning.through(health) }, health);
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
  readonly badValues: BadValues;
}

/** The Redis commands alone, as one conversation sends them ('' for the store itself): each resolves with Redis's answer or rejects. */
class RedisEpochs implements SharedStore {
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

  async lookup(hashes: readonly string[], { patient = false }: LookupOptions = {}): Promise<SharedLookup> {
    const { keys, connection, ttlMs } = this.#core;
    const scriptKeys: string[] = [];
    for (let index = hashes.length - 1; index > 0; index--) scriptKeys.push(keys.epoch(this.#conversation, hashes[index]!));
    const client = connection.client;
    const [found, stoppedAt, running] = await connection.run(() => client.epochLookupBuffer(scriptKeys.length, ...scriptKeys, ttlMs, hashes.length - 1), { patient });
    const values: Array<{ at: number; epoch: Epoch | undefined }> = [];
    for (let index = 0; index + 1 < found.length; index += 2) values.push({ at: Number(found[index]), epoch: this.#decode(found[index + 1] as Buffer) });
    const runningElsewhere = running.toString();
    return { found: values, ...(stoppedAt === 0 ? {} : { stoppedAt }), ...(runningElsewhere === '' ? {} : { runningElsewhere }) };
  }

  async load(key: string): Promise<Epoch | undefined> {
    const { keys, connection } = this.#core;
    const value = await connection.run(() => connection.client.getBuffer(keys.epoch(this.#conversation, key)));
    const epoch = value === null ? undefined : this.#decode(value);
    return epoch?.key === key ? epoch : undefined;
  }

  /** A stored value as an epoch, or undefined (a miss) when it is not a valid one: counted, and logged once per value. */
  #decode(value: Buffer): Epoch | undefined {
    const decoded = this.#core.codec.decode(value);
    if ('epoch' in decoded) return decoded.epoch;
    this.#core.badValues.report('epoch', decoded, value);
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
