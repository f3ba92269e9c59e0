import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryEpochStore } from '../../../src/compaction/epochs/epoch-store.js';
import { lookupEpochs } from '../../../src/compaction/epochs/lookup.js';
import { prefixHashes } from '../../../src/compaction/epochs/prefix-hash.js';
import { RedisEpochStore } from '../../../src/compaction/epochs/redis-store.js';
import { StoredEpochCodec } from '../../../src/compaction/epochs/stored-epoch.js';
import type { Epoch } from '../../../src/compaction/types.js';
import type { ChatMessage } from '../../../src/transcript/message.js';
import { RedisServer } from '../../support/redis-server.js';

/**
 * Issue 35: the lookup is written twice, in TypeScript (lookup.ts, the memory
 * store's) and in Lua (redis-store.ts, one round trip over every prefix). One
 * table of cases, each run against both: the TypeScript lookup over a map,
 * and the real script on a redis-server this file starts (the values written
 * as a replica writes them, unsigned and signed), read through the Redis
 * store with an empty memory, so only Redis can answer.
 */

const messages: ChatMessage[] = Array.from({ length: 10 }, (_, index) => ({ role: index % 2 === 0 ? 'user' : 'assistant', content: `message ${index}` }));
const hashes = prefixHashes({ tenant: '', model: 'm' }, messages);
const otherHashes = prefixHashes({ tenant: '', model: 'another model' }, messages);

/** A value stored under `hashes[at]`: an epoch (written from `seenLength` messages, `at` unless said), or a damaged value. */
type Stored = { readonly at: number; readonly epoch: Epoch } | { readonly at: number; readonly damaged: true };

function epoch(seenLength: number, sourceLength: number, extra: Partial<Epoch> = {}): Epoch {
  return { key: hashes[seenLength]!, sourceLength, seenLength, replacement: [{ role: 'user', content: `[compacted:summary] up to ${sourceLength}` }], marked: [0], notes: 'notes', strategy: 'summary', report: 'summarized', ...extra };
}
const inUse = (at: number, sourceLength = at, extra: Partial<Epoch> = {}): Stored => ({ at, epoch: epoch(at, sourceLength, extra) });
const pending = (at: number, sourceLength = at): Stored => ({ at, epoch: epoch(at, sourceLength, { pending: true }) });
const truncation = (at: number, sourceLength = at): Stored => inUse(at, sourceLength, { strategy: 'truncated', notes: null, expiresAt: Date.now() + 600_000 });

interface Case {
  readonly name: string;
  readonly stored: readonly Stored[];
  /** The `seenLength` of the epoch in use and of the pending one found (null: none). */
  readonly expected: { readonly inUse: number | null; readonly pending: number | null };
}

const CASES: readonly Case[] = [
  { name: 'nothing stored: nothing found', stored: [], expected: { inUse: null, pending: null } },
  { name: 'the longest prefix with an epoch in use wins', stored: [inUse(3), inUse(6)], expected: { inUse: 6, pending: null } },
  { name: 'an epoch of the whole history counts', stored: [inUse(2), inUse(9, 7)], expected: { inUse: 9, pending: null } },
  { name: 'in use vs pending: a pending epoch beyond the one in use is found with it', stored: [inUse(4), pending(7, 6)], expected: { inUse: 4, pending: 7 } },
  { name: 'a pending epoch alone is found pending, nothing in use', stored: [pending(5)], expected: { inUse: null, pending: 5 } },
  { name: 'a pending epoch shorter than the one in use is stale', stored: [pending(3), inUse(6, 5)], expected: { inUse: 6, pending: null } },
  { name: 'isBeyond: a longer pending epoch that covers less is stale', stored: [inUse(6, 5), pending(8, 4)], expected: { inUse: 6, pending: null } },
  { name: 'isBeyond: one that covers as much but was written from more is beyond', stored: [inUse(6, 5), pending(8, 5)], expected: { inUse: 6, pending: 8 } },
  { name: 'of two pending epochs beyond the one in use, the longest', stored: [inUse(2), pending(5), pending(8)], expected: { inUse: 2, pending: 8 } },
  { name: 'seenLength rule: a value stored under a prefix it was not written for does not count; a shorter one is found', stored: [inUse(3), { at: 7, epoch: epoch(5, 5) }], expected: { inUse: 3, pending: null } },
  { name: 'an epoch of another history under this prefix does not count', stored: [inUse(2), { at: 6, epoch: { ...epoch(6, 6), key: otherHashes[6]! } }], expected: { inUse: 2, pending: null } },
  { name: 'a damaged value where the epoch in use would be is a miss; a shorter one is found', stored: [inUse(4), { at: 8, damaged: true }], expected: { inUse: 4, pending: null } },
  { name: 'truncation stand-ins: a truncation (fixed expiry) is in use like any epoch, the longest wins', stored: [inUse(3), truncation(6, 5)], expected: { inUse: 6, pending: null } },
  { name: 'truncation stand-ins: a summary written from the originals beneath a truncation, pending beyond it', stored: [truncation(5), pending(8, 6)], expected: { inUse: 5, pending: 8 } },
  { name: 'truncation stand-ins: a summary written from the originals, in use, wins over the truncation it replaces', stored: [truncation(5), inUse(8, 6)], expected: { inUse: 8, pending: null } },
];

const found = (lookup: { inUse: Epoch | null; pending: Epoch | null }) => ({ inUse: lookup.inUse?.seenLength ?? null, pending: lookup.pending?.seenLength ?? null });

describe('the lookup table, TypeScript (lookup.ts)', () => {
  for (const { name, stored, expected } of CASES) {
    it(name, () => {
      // The memory store never holds a damaged value: there it is simply no epoch.
      const map = new Map(stored.flatMap((entry) => ('epoch' in entry ? [[hashes[entry.at]!, entry.epoch] as const] : [])));
      expect(found(lookupEpochs((key) => map.get(key), hashes))).toEqual(expected);
    });
  }
});

let redis: RedisServer;
let raw: Redis;
beforeAll(async () => {
  redis = await RedisServer.start();
  raw = new Redis(redis.url);
});
afterAll(async () => {
  raw.disconnect();
  await redis.close();
});

for (const secret of [null, 'a secret of at least sixteen characters']) {
  describe(`the lookup table, Lua (redis-store.ts), ${secret === null ? 'unsigned values' : 'signed values'}`, () => {
    const codec = new StoredEpochCodec({ keyPrefix: 'test:', secret, maxValueBytes: 1_048_576 });
    for (const { name, stored, expected } of CASES) {
      it(name, async () => {
        await raw.flushall();
        for (const entry of stored) await raw.set(`test:epoch:${hashes[entry.at]}`, 'epoch' in entry ? codec.encode(entry.epoch) : Buffer.from('uz\u0001not deflate'), 'PX', 600_000);
        const store = new RedisEpochStore({ url: redis.url, keyPrefix: 'test:', ttlMs: 600_000, timeoutMs: 2_000, memory: new MemoryEpochStore(), secret });
        try {
          const lookup = await store.lookup(hashes);
          expect(lookup.degraded).toBeUndefined();
          expect(found(lookup)).toEqual(expected);
        } finally {
          await store.close();
        }
      });
    }
  });
}
