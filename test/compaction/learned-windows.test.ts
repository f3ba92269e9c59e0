import { describe, expect, it } from 'vitest';
import { ContextWindows } from '../../src/compaction/sizes/context-window.js';
import { MemoryEpochStore } from '../../src/compaction/epochs/epoch-store.js';
import { prefixHashes } from '../../src/compaction/epochs/prefix-hash.js';
import { chatRequestView } from '../../src/formats/registry.js';
import { conversation } from '../support/conversation.js';
import { compactorWith, SummarizerDouble } from '../support/compaction.js';
import { JsonUpstreamDouble } from '../support/json-upstream-double.js';
import { manualClock } from '../support/manual-clock.js';

/**
 * Issue 21 item 9: a refusal naming a tiny `n_ctx` (1 token) was learned and
 * made every request of that model a 400; truncations made under a learned
 * window outlived it (5 min against 60 s). A window is never learned below
 * what `/props` reports nor below `compaction.min_learned_window`; a
 * truncation expires with the learned window it was made for.
 */

const props = (nCtx: number) => ({ status: 200, body: { default_generation_settings: { n_ctx: nCtx } } });

describe('issue 21 item 9: learned windows have a floor, and truncations expire with them', () => {
  it('a refusal below /props or below the floor is not learned', async () => {
    const clock = manualClock();
    const ignored: string[] = [];
    const windows = new ContextWindows({
      configured: (model) => (model === 'fixed' ? 32_768 : 'auto'),
      upstream: new JsonUpstreamDouble({ 'GET /props': props(8192) }),
      now: clock.now,
      minLearnedWindow: 512,
      onRefusalIgnored: (model, window, reason) => ignored.push(`${model} ${window}: ${reason}`),
    });
    expect(await windows.learnRefusal('m', 1)).toBe(false);
    expect(await windows.learnRefusal('m', 4096)).toBe(false);
    await expect(windows.get('m')).resolves.toBe(8192);
    expect(await windows.learnRefusal('fixed', 1)).toBe(false);
    await expect(windows.get('fixed')).resolves.toBe(32_768);
    expect(await windows.learnRefusal('fixed', 16_384)).toBe(true);
    await expect(windows.get('fixed')).resolves.toBe(16_384);
    expect(ignored).toEqual([
      'm 1: below compaction.min_learned_window (512)',
      'm 4096: below what /props reports (8192)',
      'fixed 1: below compaction.min_learned_window (512)',
    ]);
  });

  it('a truncation made under a learned window expires with it (60 s), not after 5 minutes', async () => {
    const clock = manualClock();
    const summarizer = new SummarizerDouble();
    summarizer.failures = 100;
    const store = new MemoryEpochStore({ now: clock.now });
    const { compactor } = compactorWith({ models: { '*': { context_window: 32_768 } } }, { summarizer, now: clock.now, store, upstream: JsonUpstreamDouble.llamaServer({ window: null }) });
    expect(await compactor.windows.learnRefusal('m', 8192)).toBe(true);
    const messages = conversation({ turns: 20 });
    const prepared = await compactor.compact({ request: chatRequestView({ model: 'm', messages }), tenant: '', signal: new AbortController().signal });
    expect(prepared.report ?? '').toMatch(/^truncated/);
    const { inUse } = await store.lookup(prefixHashes({ tenant: '', model: 'm' }, messages));
    expect(inUse?.strategy).toBe('truncated');
    expect(inUse!.expiresAt! - clock.now()).toBeLessThanOrEqual(60_000);
  });
});
