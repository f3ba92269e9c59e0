import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { defaultConfig } from '../../src/config/schema.js';
import { SlotRouter } from '../../src/slots/slot-router.js';
import { UpstreamClient } from '../../src/upstream/client.js';
import { FakeUpstream, replies } from '../support/fake-upstream.js';
import { SlotLlama } from '../support/slot-llama.js';

let upstream: FakeUpstream;
let client: UpstreamClient;
beforeEach(async () => {
  upstream = await FakeUpstream.start();
  client = new UpstreamClient({ url: upstream.url, timeouts: { connectMs: 1000, headersMs: 5000, idleMs: 5000 } });
});
afterEach(async () => {
  await client.close();
  await upstream.close();
});

const config = (overrides: Partial<ReturnType<typeof defaultConfig>['upstream']> = {}) => ({ ...defaultConfig().upstream, slots: 'auto' as const, ...overrides });

describe('SlotRouter', () => {
  it("schedules a llama-server's slots as /props reports them, one scheduler for every model name it serves", async () => {
    new SlotLlama(upstream, { slots: 3 });
    const router = new SlotRouter({ upstream: client, config: config() });
    const lease = await router.acquire('qwen', { kind: 'turn', key: 'a' });
    expect(lease?.slot).toBe(0);
    const other = await router.acquire('another-name', { kind: 'turn', key: 'b' });
    expect(other?.slot).toBe(1);
    expect(router.stats()).toHaveLength(1);
    expect(router.stats()[0]?.stats.slots).toHaveLength(3);
  });

  it('schedules nothing for a server that reports no slots, or with upstream.slots off', async () => {
    upstream.route('GET', '/props', replies.json(404, { error: 'not found' }));
    upstream.route('GET', '/slots', replies.json(404, { error: 'not found' }));
    expect(await new SlotRouter({ upstream: client, config: config() }).acquire('m', { kind: 'turn', key: 'a' })).toBeNull();
    new SlotLlama(upstream, { slots: 2 });
    const off = new SlotRouter({ upstream: client, config: config({ slots: 'off' }) });
    expect(await off.acquire('m', { kind: 'turn', key: 'a' })).toBeNull();
    expect(upstream.requestsTo('/props')).toHaveLength(1);
  });

  it('knows at once, without a promise, that a server found without slots to schedule is not scheduled, until it is asked again (issue 40)', async () => {
    new SlotLlama(upstream, { slots: 1 });
    let now = 0;
    const router = new SlotRouter({ upstream: client, config: config(), now: () => now });
    // Not yet asked: it may have slots.
    expect(router.unscheduled('m')).toBe(false);
    expect(await router.acquire('m', { kind: 'turn', key: 'a' })).toBeNull();
    expect(router.unscheduled('m')).toBe(true);
    // A minute on, the server is asked again (it may have been restarted with -np 4).
    now += 60_000;
    expect(router.unscheduled('m')).toBe(false);
    const scheduled = new SlotRouter({ upstream: client, config: config({ slot_save: true }) });
    expect(await scheduled.acquire('m', { kind: 'turn', key: 'a' })).not.toBeNull();
    expect(scheduled.unscheduled('m')).toBe(false);
  });

  it('saves and restores over /slots/{id}?action=, so an evicted conversation is read from its file', async () => {
    const llama = new SlotLlama(upstream, { slots: 1, slotSave: true, cacheRamTokens: 0 });
    const router = new SlotRouter({ upstream: client, config: config({ slot_save: true }) });
    for (const key of ['a', 'b', 'a']) (await router.acquire('m', { kind: 'turn', key }))?.release();
    // The scheduler's actions take their round trips after each release.
    await vi.waitFor(() => expect(llama.actions).toEqual(['save 0 compactor-a.bin', 'save 0 compactor-b.bin', 'restore 0 compactor-a.bin']), { timeout: 10_000 });
    expect(router.stats()[0]?.stats).toMatchObject({ saves: 2, restores: 1 });
  });

  it('stops saving, and says so, when llama-server has no --slot-save-path', async () => {
    new SlotLlama(upstream, { slots: 1 });
    const warnings: string[] = [];
    const log = { info: () => undefined, warn: (_: unknown, message: string) => void warnings.push(message) };
    const router = new SlotRouter({ upstream: client, config: config({ slot_save: true }), log });
    for (const key of ['a', 'b', 'c']) (await router.acquire('m', { kind: 'turn', key }))?.release();
    expect(router.stats()[0]?.stats).toMatchObject({ saves: 0, saveFailures: 1 });
    expect(warnings).toEqual([expect.stringContaining('--slot-save-path')]);
  });
});
