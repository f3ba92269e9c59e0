import { movingAverage, RATIO_RANGE, type UnsharedMeasures } from '../types.js';
import type { BadValues } from './bad-values.js';
import type { LearnedState, SharedLearning } from './learning.js';
import type { RedisConnection } from './redis-connection.js';
import type { RedisKeys } from './redis-keys.js';
import type { ValueSigner } from './signed-value.js';
import type { StoreHealth } from './store-health.js';

/**
 * The ratios and back-offs replicas share, in Redis (learning.ts is the port),
 * each value signed when `cache.redis.secret` is set (signed-value.ts): a
 * value that is unsigned, badly signed, or copied from another key is
 * ignored, counted and logged once (bad-values.ts), never trusted.
 *
 * A ratio (`ratio:<keyed tenant> NUL <model>`, redis-keys.ts) is a list: each
 * share of a replica appends its measures of that pair, in the order taken,
 * as one signed entry; the list keeps the last {@link RATIO_ENTRIES}. A reader
 * folds every entry in order into the one moving average of types.ts, so the
 * ratio is every replica's measures merged in the order they arrived, as the
 * old merge script made it, and no script has to sign (Lua cannot). What
 * the entries beyond the list would add weighs below 0.7^32 ≈ 1e-5.
 *
 * A back-off (`backoff:<conversation>`) holds the time it ends, signed, with
 * that expiry: its end cannot be moved later by editing the key's TTL, nor
 * a value moved to another conversation.
 */

/** Shares kept per ratio: far more than the measures that still weigh in its average. */
const RATIO_ENTRIES = 32;

// KEYS[1]: a ratio; ARGV[1]: the TTL (ms), ARGV[2]: the entries kept, ARGV[3]: one share's entry (opaque: signed by the
// replica). A value of another kind under the name (an older version's number, another program's) makes room.
const RATIO_SHARE_SCRIPT = `
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'list' and kind ~= 'none' then redis.call('DEL', KEYS[1]) end
redis.call('RPUSH', KEYS[1], ARGV[3])
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[2]), -1)
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1`;

// KEYS[1]: a ratio. Its entries in order; a string under the name is one entry (checked as any: unsigned, it is a bad
// value when a secret is set); anything else, none.
const RATIO_READ_SCRIPT = `
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'list' then return redis.call('LRANGE', KEYS[1], 0, -1) end
if kind == 'string' then return { redis.call('GET', KEYS[1]) } end
return {}`;

// KEYS[1]: a back-off. Its value ('' when none) and its PTTL.
const BACKOFF_READ_SCRIPT = `
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'string' then return { '', -2 } end
return { redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]) }`;

export const LEARNING_SCRIPTS = {
  ratioShare: { lua: RATIO_SHARE_SCRIPT, numberOfKeys: 1 },
  ratioRead: { lua: RATIO_READ_SCRIPT, numberOfKeys: 1 },
  backoffRead: { lua: BACKOFF_READ_SCRIPT, numberOfKeys: 1 },
};


export interface RedisLearningOptions {
  readonly connection: RedisConnection;
  readonly keys: RedisKeys;
  readonly signer: ValueSigner;
  readonly badValues: BadValues;
  /** The TTL of a ratio, refreshed by each share. */
  readonly ttlMs: number;
  readonly now?: () => number;
}

/** The commands alone: each resolves with what Redis answered, or rejects. */
export class RedisLearning {
  readonly #options: RedisLearningOptions;
  readonly #now: () => number;

  constructor(options: RedisLearningOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  /** The port, each command run through the store's health (a fault is counted and answered with nothing). */
  through(health: StoreHealth): SharedLearning {
    return {
      read: async (tenant, model, conversation) => {
        const [ratio, backoffMs] = await Promise.all([health.call('ratio', () => this.ratio(tenant, model)), health.call('backoff', () => this.backoffMs(conversation))]);
        // A part not read is left out: an unread back-off must not end the one this replica holds.
        return { ...(ratio?.value === undefined ? {} : { ratio: ratio.value }), ...(backoffMs === undefined ? {} : { backoffMs }) } satisfies LearnedState;
      },
      shareRatios: async (measures) => {
        // Sent together: a pipelining client writes them to the socket in one go, one round trip for all.
        await Promise.all(measures.map((measure) => health.call('ratio', () => this.share(measure))));
      },
      noteFailure: async (conversation, ms) => {
        await health.call('backoff', () => this.noteFailure(conversation, ms));
      },
      clearFailure: async (conversation) => {
        await health.call('backoff', () => this.clearFailure(conversation));
      },
    };
  }

  /** The merged ratio of a tenant's model (undefined when none was shared, or none verifies). */
  async ratio(tenant: string, model: string): Promise<{ value: number | undefined }> {
    const { connection, keys, signer, badValues } = this.#options;
    const key = keys.ratio(tenant, model);
    const entries = await connection.run(() => connection.client.ratioRead(key));
    const samples: number[] = [];
    for (const entry of entries) {
      const opened = signer.open(key, entry);
      if ('bad' in opened) {
        badValues.report('ratio', opened, Buffer.from(entry));
        continue;
      }
      const measures = opened.text.split(',').map(Number);
      if (!measures.every((sample) => Number.isFinite(sample) && sample >= RATIO_RANGE.min && sample <= RATIO_RANGE.max)) {
        badValues.report('ratio', { bad: 'schema', detail: `measures outside ${RATIO_RANGE.min}…${RATIO_RANGE.max}` }, Buffer.from(entry));
        continue;
      }
      samples.push(...measures);
    }
    return { value: movingAverage(undefined, samples) };
  }

  async share({ tenant, model, samples }: UnsharedMeasures): Promise<void> {
    const { connection, keys, signer, ttlMs } = this.#options;
    if (samples.length === 0) return;
    const key = keys.ratio(tenant, model);
    await connection.run(() => connection.client.ratioShare(key, ttlMs, RATIO_ENTRIES, signer.seal(key, samples.join(','))));
  }

  /** How long the conversation's back-off still holds (ms; 0: none, or none that verifies). */
  async backoffMs(conversation: string): Promise<number> {
    const { connection, keys, signer, badValues } = this.#options;
    const key = keys.backoff(conversation);
    const [value, pttl] = await connection.run(() => connection.client.backoffRead(key));
    if (value === '' || !(pttl > 0)) return 0;
    const opened = signer.open(key, value);
    if ('bad' in opened) {
      badValues.report('back-off', opened, Buffer.from(value));
      return 0;
    }
    // Its signed end bounds the key's TTL; a value without one (an older version's `1`, no secret) is its TTL.
    const until = Number(opened.text);
    const signedRemaining = Number.isFinite(until) && opened.text !== '1' ? until - this.#now() : Number.POSITIVE_INFINITY;
    return Math.max(0, Math.min(pttl, signedRemaining));
  }

  async noteFailure(conversation: string, ms: number): Promise<void> {
    const { connection, keys, signer } = this.#options;
    const key = keys.backoff(conversation);
    await connection.run(() => connection.client.set(key, signer.seal(key, String(this.#now() + ms)), 'PX', ms));
  }

  async clearFailure(conversation: string): Promise<void> {
    const { connection, keys } = this.#options;
    await connection.run(() => connection.client.del(keys.backoff(conversation)));
  }
}
