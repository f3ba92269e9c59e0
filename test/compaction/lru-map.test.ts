import { describe, expect, it } from 'vitest';
import { LruMap } from '../../src/compaction/lru-map.js';

describe('LruMap', () => {
  it('keeps `capacity` entries, forgetting the least recently read or written first', () => {
    const map = new LruMap<string, number>(2);
    map.set('a', 1).set('b', 2);
    expect(map.get('a')).toBe(1); // a is now the most recent
    map.set('c', 3);
    expect([...map.entries()]).toEqual([
      ['a', 1],
      ['c', 3],
    ]);
    map.set('a', 10);
    map.set('d', 4);
    expect([...map.entries()]).toEqual([
      ['a', 10],
      ['d', 4],
    ]);
    expect(map.size).toBe(2);
    expect(map.has('c')).toBe(false);
    expect(map.get('c')).toBeUndefined();
  });
});
