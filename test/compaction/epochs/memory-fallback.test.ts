import { describe, expect, it } from 'vitest';
import { MemoryEpochStore } from '../../../src/compaction/epochs/epoch-store.js';
import { EpochRepository } from '../../../src/compaction/epochs/repository.js';
import type { SharedLookup, SharedStore } from '../../../src/compaction/epochs/shared-store.js';
import type { Epoch } from '../../../src/compaction/types.js';

/**
 * Degrading to memory is a wrapper any shared store gets, not Redis code:
 * a store that only answers or rejects (here a double) is answered from
 * memory when it rejects, its outage warned once and counted per command.
 */

const hashes = ['h0', 'h1', 'h2', 'h3'];
const epochAt = (length: number): Epoch => ({ key: hashes[length]!, sourceLength: length, seenLength: length, replacement: [{ role: 'system', content: `notes ${length}` }], notes: null, strategy: 'summary', report: 'summarized' });

/** A shared store whose commands all reject while `down`, and otherwise answer `found`. */
function sharedDouble(): SharedStore & { down: boolean; saved: Epoch[]; found: SharedLookup; readyListeners: Array<() => void> } {
  const double = {
    down: false,
    saved: [] as Epoch[],
    found: { found: [] } as SharedLookup,
    readyListeners: [] as Array<() => void>,
    ready: true,
    onReady: (listener: () => void) => void double.readyListeners.push(listener),
    async lookup() {
      if (double.down) throw new Error('connection reset');
      return double.found;
    },
    async load() {
      if (double.down) throw new Error('connection reset');
      return undefined;
    },
    async save(epoch: Epoch) {
      if (double.down) throw new Error('connection reset');
      double.saved.push(epoch);
    },
    async lease() {
      if (double.down) throw new Error('connection reset');
      return null;
    },
    async close() {},
  };
  return double;
}

function logger(): { lines: string[]; info: (fields: unknown, message: string) => void; warn: (fields: unknown, message: string) => void } {
  const lines: string[] = [];
  return { lines, info: (_fields, message) => lines.push(`info ${message}`), warn: (_fields, message) => lines.push(`warn ${message}`) };
}

describe('EpochRepository over a shared store', () => {
  it('answers from memory while the shared store rejects, warns once, counts each fault, and says when it is back', async () => {
    const shared = sharedDouble();
    const faults: string[] = [];
    const log = logger();
    const store = new EpochRepository(shared, { ttlMs: 60_000, memory: new MemoryEpochStore(), logger: log, onFault: (operation) => faults.push(operation), name: 'double' });
    await store.save(epochAt(2));
    expect(shared.saved.map((epoch) => epoch.key)).toEqual(['h2']);

    shared.down = true;
    expect((await store.lookup(hashes)).inUse?.key).toBe('h2');
    expect(await store.load('h2')).toMatchObject({ key: 'h2' });
    expect(await store.lease('h3', 1_000)).not.toBeNull(); // unreachable: this replica computes on its own
    expect(store.degraded).toBe(true);
    expect(faults).toEqual(['lookup', 'load', 'lease']);
    expect(log.lines).toEqual(["warn epoch store unavailable: using this replica's memory until it is back"]);

    shared.down = false;
    expect(await store.lease('h3', 1_000)).toBeNull(); // another replica holds it
    expect(store.degraded).toBe(false);
    expect(log.lines.at(-1)).toBe('info epoch store back: epochs are shared again');
  });

  it('writes back an epoch memory knows and the shared store lost (flushed), and keeps what the shared store finds', async () => {
    const shared = sharedDouble();
    const store = new EpochRepository(shared, { ttlMs: 60_000, memory: new MemoryEpochStore(), name: 'double' });
    await store.save(epochAt(3));
    shared.saved.length = 0;
    expect((await store.lookup(hashes)).inUse?.key).toBe('h3');
    await new Promise((resolve) => setImmediate(resolve));
    expect(shared.saved.map((epoch) => epoch.key)).toEqual(['h3']);

    const wrongKey = { ...epochAt(2), key: 'another history' };
    const sharedFinds = sharedDouble();
    sharedFinds.found = { found: [{ at: 2, epoch: wrongKey }], stoppedAt: 2 };
    const checked = new EpochRepository(sharedFinds, { ttlMs: 60_000, memory: new MemoryEpochStore(), name: 'double' });
    expect((await checked.lookup(hashes)).inUse).toBeNull(); // an epoch of another history is not used
    sharedFinds.found = { found: [{ at: 2, epoch: epochAt(2) }], stoppedAt: 2 };
    expect((await checked.lookup(hashes)).inUse?.key).toBe('h2');
  });
});
