import { describe, expect, it } from 'vitest';
import { isBeyond, lookupEpochs } from '../../../src/compaction/epochs/lookup.js';
import type { Epoch } from '../../../src/compaction/types.js';

/** Issue 25: an epoch that compressed deep into its kept part covers up to its last compressed result; a summary prepared after it may cover no more. */

const epoch = (key: string, sourceLength: number, seenLength: number, pending: boolean): Epoch => ({ key, sourceLength, seenLength, replacement: [], notes: null, strategy: 'summary', report: '', pending });

describe('a pending epoch beyond the one in use', () => {
  it('is one that covers more, or as much but was written from more of the history; else stale', () => {
    const inUse = epoch('h20', 18, 20, false);
    expect(isBeyond(epoch('h24', 19, 24, true), inUse)).toBe(true);
    expect(isBeyond(epoch('h24', 18, 24, true), inUse)).toBe(true);
    expect(isBeyond(epoch('h20', 18, 20, true), inUse)).toBe(false);
    expect(isBeyond(epoch('h12', 10, 12, true), inUse)).toBe(false);
    expect(isBeyond(epoch('h12', 10, 12, true), null)).toBe(true);
  });

  it('the lookup keeps a summary prepared after a compression that covered as much, and finds it pending', () => {
    const hashes = Array.from({ length: 27 }, (_, index) => `h${index}`);
    const stored = new Map<string, Epoch>([
      ['h20', epoch('h20', 18, 20, false)],
      ['h24', epoch('h24', 18, 24, true)],
    ]);
    expect(lookupEpochs((key) => stored.get(key), hashes, (stale) => void stored.delete(stale.key))).toMatchObject({ inUse: { key: 'h20' }, pending: { key: 'h24' } });
  });
});
