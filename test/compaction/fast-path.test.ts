import { afterEach, describe, expect, it, vi } from 'vitest';
import * as prefixHash from '../../src/compaction/epochs/prefix-hash.js';
import { conversation } from '../support/conversation.js';
import { compactorWith } from './doubles.js';

vi.mock('../../src/compaction/prefix-hash.js', async (importOriginal) => {
  const actual = await importOriginal<typeof import('../../src/compaction/epochs/prefix-hash.js')>();
  return { ...actual, prefixHashes: vi.fn(actual.prefixHashes) };
});

const signal = new AbortController().signal;

afterEach(() => {
  vi.mocked(prefixHash.prefixHashes).mockClear();
});

describe('Compactor.prepare fast path', () => {
  it('hashes nothing while the raw estimate is under the soft threshold', async () => {
    const { compactor } = compactorWith();
    const messages = conversation({ turns: 3 });
    const prepared = await compactor.prepare({ body: { model: 'm', messages }, messages, tenant: '', signal });
    expect(prepared.messages).toBe(messages);
    expect(prefixHash.prefixHashes).not.toHaveBeenCalled();
  });

  it('hashes the history once it is over the soft threshold', async () => {
    // 14 turns: above the soft threshold (0.6 × 7168) and under the threshold (0.85 × 7168).
    const { compactor } = compactorWith();
    const messages = conversation({ turns: 14 });
    await compactor.prepare({ body: { model: 'm', messages }, messages, tenant: '', signal });
    expect(prefixHash.prefixHashes).toHaveBeenCalledTimes(1);
  });

  it('hashes a history under the soft threshold when max_messages counts it over', async () => {
    const { compactor } = compactorWith({ compaction: { max_messages: 4 } });
    const messages = conversation({ turns: 3 });
    await compactor.prepare({ body: { model: 'm', messages }, messages, tenant: '', signal });
    expect(prefixHash.prefixHashes).toHaveBeenCalled();
  });
});
