import { describe, it, expect } from 'vitest';
import { MemoryEpochStore } from '../../../src/compaction/epochs/epoch-store.js';
import type { Epoch } from '../../../src/compaction/types.js';

const epoch = (key: string, extra: Partial<Epoch> = {}): Epoch => ({
  key,
  sourceLength: 3,
  seenLength: 3,
  replacement: [{ role: 'system', content: 'x' }],
  notes: null,
  strategy: 'summary',
  report: 'summarized',
  ...extra,
});

/** A clock the test moves by hand. */
function clock(start = 1_000_000): { now: () => number; advance: (milliseconds: number) => void } {
  let time = start;
  return { now: () => time, advance: (milliseconds) => (time += milliseconds) };
}

describe('MemoryEpochStore', () => {
  it('stores, returns the same epoch, deletes, and counts its entries', () => {
    const store = new MemoryEpochStore();
    const first = epoch('a');
    expect(store.size).toBe(0);
    store.set(first);
    store.set(epoch('b'));
    expect(store.size).toBe(2);
    expect(store.get('a')).toBe(first);
    expect(store.get('missing')).toBeUndefined();
    store.delete('a');
    expect(store.get('a')).toBeUndefined();
    expect(store.size).toBe(1);
    store.delete('missing');
    expect(store.size).toBe(1);
  });

  it('replaces the epoch of a key that is set again, without growing', () => {
    const store = new MemoryEpochStore();
    store.set(epoch('a'));
    const second = epoch('a', { report: 'again' });
    store.set(second);
    expect(store.size).toBe(1);
    expect(store.get('a')).toBe(second);
  });

  it('evicts the least recently set entry beyond maxEntries', () => {
    const store = new MemoryEpochStore({ maxEntries: 2 });
    store.set(epoch('a'));
    store.set(epoch('b'));
    store.set(epoch('c'));
    expect(store.size).toBe(2);
    expect(store.get('a')).toBeUndefined();
    expect(store.get('b')).toBeDefined();
    expect(store.get('c')).toBeDefined();
  });

  it('a get refreshes an entry: the least recently used goes first', () => {
    const store = new MemoryEpochStore({ maxEntries: 3 });
    store.set(epoch('a'));
    store.set(epoch('b'));
    store.set(epoch('c'));
    expect(store.get('a')).toBeDefined(); // order now b, c, a
    store.set(epoch('d'));
    expect(store.get('b')).toBeUndefined();
    store.set(epoch('e')); // evicts c
    expect(store.get('c')).toBeUndefined();
    expect(store.get('a')).toBeDefined();
    expect(store.get('d')).toBeDefined();
    expect(store.get('e')).toBeDefined();
    expect(store.size).toBe(3);
  });

  it('setting a key again refreshes it too', () => {
    const store = new MemoryEpochStore({ maxEntries: 2 });
    store.set(epoch('a'));
    store.set(epoch('b'));
    store.set(epoch('a'));
    store.set(epoch('c'));
    expect(store.get('b')).toBeUndefined();
    expect(store.get('a')).toBeDefined();
  });

  it('drops an entry once its ttl has passed, by the injected clock', () => {
    const time = clock();
    const store = new MemoryEpochStore({ ttlMs: 1000, now: time.now });
    store.set(epoch('a'));
    time.advance(999);
    expect(store.get('a')).toBeDefined();
    time.advance(1);
    expect(store.get('a')).toBeUndefined();
    expect(store.size).toBe(0);
  });

  it('a get does not extend the ttl', () => {
    const time = clock();
    const store = new MemoryEpochStore({ ttlMs: 1000, now: time.now });
    store.set(epoch('a'));
    time.advance(600);
    expect(store.get('a')).toBeDefined();
    time.advance(600);
    expect(store.get('a')).toBeUndefined();
  });

  it("honours an epoch's own expiresAt when it comes before the ttl", () => {
    const time = clock();
    const store = new MemoryEpochStore({ ttlMs: 10_000, now: time.now });
    store.set(epoch('short', { expiresAt: time.now() + 300 }));
    store.set(epoch('long', { expiresAt: time.now() + 60_000 }));
    time.advance(299);
    expect(store.get('short')).toBeDefined();
    time.advance(1);
    expect(store.get('short')).toBeUndefined();
    // An expiresAt beyond the ttl does not outlive the ttl.
    time.advance(9_700);
    expect(store.get('long')).toBeUndefined();
  });

  it('defaults to a day of ttl', () => {
    const time = clock();
    const store = new MemoryEpochStore({ now: time.now });
    store.set(epoch('a'));
    time.advance(86_400_000 - 1);
    expect(store.get('a')).toBeDefined();
    time.advance(1);
    expect(store.get('a')).toBeUndefined();
  });
});

describe('MemoryEpochStore bounded in bytes (issue 26 item 4)', () => {
  const text = (bytes: number, seed: string): string => `${seed} `.repeat(Math.ceil(bytes / (seed.length + 1))).slice(0, bytes);
  const conversation = (key: string, head: string, ownBytes: number): Epoch =>
    epoch(key, { replacement: [{ role: 'system', content: head }, { role: 'user', content: text(ownBytes, key) }, { role: 'assistant', content: 'ok' }] });

  it('holds no more than maxBytes: the least recently used epochs go first', () => {
    const store = new MemoryEpochStore({ maxBytes: 100_000 });
    for (let index = 0; index < 50; index++) store.set(conversation(`k${index}`, `head ${index}`, 10_000));
    expect(store.bytes).toBeLessThanOrEqual(100_000);
    expect(store.size).toBeGreaterThan(5);
    expect(store.size).toBeLessThan(10);
    expect(store.get('k49')).toBeDefined();
    expect(store.get('k0')).toBeUndefined();
  });

  it('counts a large head that many epochs hold alike once, and holds one copy of it', () => {
    const head = text(12_000, 'You are a coding agent.');
    const store = new MemoryEpochStore({ maxBytes: 1_000_000 });
    // Each epoch parsed from its own request: equal text, distinct strings and objects.
    for (let index = 0; index < 200; index++) store.set(conversation(`k${index}`, `${head}`.slice(0), 100));
    expect(store.size).toBe(200);
    // 200 × 12 KB would be 2.4 MB: one head plus 200 small epochs stays well under 1 MB.
    expect(store.bytes).toBeLessThan(12_500 + 200 * 1_500);
    const heads = new Set(Array.from({ length: 200 }, (_, index) => store.get(`k${index}`)!.replacement[0]));
    expect(heads.size).toBe(1);
    expect(store.get('k7')!.replacement[0]).toEqual({ role: 'system', content: head });
  });

  it('lets a shared message go with the last epoch that held it', () => {
    const head = text(5_000, 'shared');
    const store = new MemoryEpochStore();
    store.set(conversation('a', head, 10));
    store.set(conversation('b', head, 10));
    const both = store.bytes;
    store.delete('a');
    expect(store.bytes).toBeGreaterThan(5_000);
    expect(store.bytes).toBeLessThan(both);
    store.delete('b');
    expect(store.bytes).toBe(0);
  });

  it('replacing an epoch under the same key neither leaks nor double-counts its shared messages', () => {
    const head = text(5_000, 'shared');
    const store = new MemoryEpochStore();
    store.set(conversation('a', head, 10));
    const once = store.bytes;
    for (let round = 0; round < 10; round++) store.set(conversation('a', head, 10));
    expect(store.bytes).toBe(once);
  });
});
