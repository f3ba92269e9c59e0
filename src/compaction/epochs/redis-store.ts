import { randomUUID } from 'node:crypto';
import type { CompactionLogger } from '../epoch-writer.js';
import { decodeEpoch, encodeEpoch } from './epoch-codec.js';
import { LEARNING_WEIGHT, type UnsharedMeasures } from '../token-ratio.js';
import type { Epoch, EpochLease, EpochLookup, EpochStore, LookupOptions, MemoryEpochStore, SharedReads } from './epoch-store.js';
import { RedisConnection, type StoreOperation } from './redis-connection.js';
import { RedisKeys } from './redis-keys.js';

/**
 * Epochs in Redis (≥ 7), Valkey, or a Redis Cluster, shared by every replica,
 * with this process's memory store behind it: every epoch saved or found is
 * kept there too, so when Redis is down, slow or flushed the replica goes on
 * with what it knows (warned once per outage, counted), and a conversation it
 * served keeps its forwarded prefix. No call ever fails a request: a command
 * that errs or takes longer than `timeoutMs` is answered from memory.
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
 * A store is used through {@link forConversation}: on a cluster the keys of
 * one conversation carry its hash tag, so its scripts run on one node.
 *
 * Over 200 lines: the scripts sit with the calls that run them.
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
}

/** What every conversation's view of one store shares. */
interface StoreCore {
  readonly connection: RedisConnection;
  readonly keys: RedisKeys;
  readonly memory: MemoryEpochStore;
  readonly options: RedisEpochStoreOptions;
  readonly now: () => number;
}

export class RedisEpochStore implements EpochStore {
  readonly #core: StoreCore;
  /** The conversation this view's keys belong to ('' for the store itself, whose epoch keys carry no hash tag). */
  readonly #conversation: string;

  constructor(options: RedisEpochStoreOptions, view?: { core: StoreCore; conversation: string }) {
    this.#conversation = view?.conversation ?? '';
    if (view !== undefined) {
      this.#core = view.core;
      return;
    }
    const cluster = options.cluster === true;
    const connection = new RedisConnection({
      urls: typeof options.url === 'string' ? [options.url] : options.url,
      cluster,
      timeoutMs: options.timeoutMs,
      scripts: SCRIPTS,
      logger: options.logger,
      onFault: options.onFault,
    });
    this.#core = { connection, keys: new RedisKeys(options.keyPrefix, cluster), memory: options.memory, options, now: options.now ?? Date.now };
  }

  /** The store as one conversation uses it: on a cluster its keys share the conversation's hash tag (one node). */
  forConversation(conversation: string): RedisEpochStore {
    return new RedisEpochStore(this.#core.options, { core: this.#core, conversation });
  }

  /** Epochs held in this process's memory (Redis counts its own: `DBSIZE`). */
  get size(): number {
    return this.#core.memory.size;
  }

  /** Whether the replica is working from memory now (Redis down, or its last command failed). */
  get degraded(): boolean {
    return this.#core.connection.degraded;
  }

  async lookup(hashes: readonly string[], shared?: SharedReads, options: LookupOptions = {}): Promise<EpochLookup> {
    const { memory } = this.#core;
    const local = await memory.lookup(hashes);
    const reply = await this.#lookupReply(hashes, shared, options);
    if (reply === undefined) return { ...local, degraded: true };
    const [found, pendingFound, ratio, backoff, running] = reply;
    const state = shared === undefined ? {} : { shared: { ratio: Number.isFinite(ratio) ? ratio : undefined, backoffMs: Math.max(0, backoff) } };
    const matches = (epoch: Epoch | undefined): epoch is Epoch => epoch !== undefined && hashes[epoch.seenLength] === epoch.key;
    let inUse = matches(found) ? found : null;
    // Memory knows a longer one: Redis was flushed or restarted empty. It is written back, so other replicas find it again.
    if (local.inUse !== null && (inUse === null || local.inUse.seenLength > inUse.seenLength)) {
      inUse = local.inUse;
      void this.save(inUse);
    } else if (inUse !== null) {
      memory.set(inUse);
    }
    const pending = matches(pendingFound) && pendingFound.sourceLength > (inUse?.sourceLength ?? 0) ? pendingFound : local.pending;
    return { inUse, pending, ...state, ...(running === '' || pending !== null ? {} : { runningElsewhere: running }) };
  }

  /** The script's answer (the ratio read beside it on a cluster), decoded; undefined when Redis did not answer. */
  async #lookupReply(hashes: readonly string[], shared: SharedReads | undefined, { patient = false }: LookupOptions): Promise<[Epoch | undefined, Epoch | undefined, number | undefined, number, string] | undefined> {
    const { keys, connection, options } = this.#core;
    const conversation = this.#conversation;
    const scriptKeys: string[] = [];
    const ratioInScript = shared !== undefined && keys.ratioInScript;
    if (ratioInScript) scriptKeys.push(keys.ratio(shared.ratio));
    if (shared !== undefined) scriptKeys.push(keys.backoff(shared.conversation));
    const sharedKeys = scriptKeys.length;
    for (let index = hashes.length - 1; index > 0; index--) scriptKeys.push(keys.epoch(conversation, hashes[index]!));
    const client = connection.client;
    const script = connection.call('lookup', () => client.epochLookupBuffer(scriptKeys.length, ...scriptKeys, options.ttlMs, sharedKeys, ratioInScript ? '1' : '0'), { patient });
    // On a cluster the ratio is in another slot: read at the same time, so still one round trip.
    const beside = shared === undefined || ratioInScript ? undefined : connection.call('lookup', () => client.getBuffer(keys.ratio(shared.ratio)), { patient });
    const [reply, ratioBeside] = await Promise.all([script, beside]);
    if (reply === undefined) return undefined;
    const ratioText = ratioInScript ? reply[2] : (ratioBeside ?? Buffer.alloc(0));
    const ratio = ratioText.length === 0 ? undefined : Number(ratioText.toString());
    const decoded = (value: Buffer): Epoch | undefined => (value.length === 0 ? undefined : decodeEpoch(value));
    return [decoded(reply[0]), decoded(reply[1]), ratio, reply[3], reply[4].toString()];
  }

  async shareRatios(measures: readonly UnsharedMeasures[]): Promise<void> {
    const { keys, connection, options } = this.#core;
    // Sent together: ioredis writes them to the socket in one go, one round trip for all.
    await Promise.all(
      measures.map(({ name, samples }) =>
        connection.call('ratio', () => connection.client.tokenRatioMerge(keys.ratio(name), LEARNING_WEIGHT, options.ttlMs, ...samples)),
      ),
    );
  }

  async noteFailure(conversation: string, ms: number): Promise<void> {
    const { keys, connection } = this.#core;
    await connection.call('backoff', () => connection.client.set(keys.backoff(conversation), '1', 'PX', ms));
  }

  async clearFailure(conversation: string): Promise<void> {
    const { keys, connection } = this.#core;
    await connection.call('backoff', () => connection.client.del(keys.backoff(conversation)));
  }

  async load(key: string): Promise<Epoch | undefined> {
    const { keys, connection, memory } = this.#core;
    const value = await connection.call('load', () => connection.client.getBuffer(keys.epoch(this.#conversation, key)));
    const epoch = value === undefined || value === null ? undefined : decodeEpoch(value);
    return epoch ?? memory.get(key);
  }

  async save(epoch: Epoch): Promise<void> {
    const { keys, connection, memory, options, now } = this.#core;
    memory.set(epoch);
    const ttl = epoch.expiresAt === undefined ? options.ttlMs : Math.min(options.ttlMs, epoch.expiresAt - now());
    if (ttl <= 0) return;
    await connection.call('save', () => connection.client.set(keys.epoch(this.#conversation, epoch.key), encodeEpoch(epoch), 'PX', Math.ceil(ttl)));
  }

  async lease(key: string, ttlMs: number): Promise<EpochLease | null> {
    const { keys, connection } = this.#core;
    const leaseKey = keys.lease(this.#conversation, key);
    const token = randomUUID();
    const taken = await connection.call('lease', () => connection.client.set(leaseKey, token, 'PX', ttlMs, 'NX'));
    // Redis unreachable: this replica computes on its own (its single flight still joins its own callers).
    if (taken === undefined) return { renew: async () => true, release: async () => undefined };
    if (taken === null) return null;
    return {
      renew: async () => (await connection.call('lease', () => connection.client.epochLeaseRenew(leaseKey, token, ttlMs))) !== 0,
      release: async () => {
        await connection.call('lease', () => connection.client.epochLeaseRelease(leaseKey, token));
      },
    };
  }

  async close(): Promise<void> {
    this.#core.connection.close();
  }
}
