import { describe, expect, it, vi } from 'vitest';
import { ExchangeAbort } from '../../src/upstream/exchange-abort.js';
import { FakeUpstream } from '../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';
import { SlotLlama, type SlotLlamaOptions } from '../support/slot-llama.js';

/** Issue 28 through the proxy: each conversation on its own llama-server slot, one request per slot at a time. */

const track = closedAfterEachTest();

async function setUp(options: SlotLlamaOptions, config: Record<string, unknown> = {}) {
  const upstream = track(await FakeUpstream.start());
  const llama = new SlotLlama(upstream, options);
  const proxy = track(await startProxy(upstream, { listen: true, config: { upstream: { slots: 'auto', ...config } } }));
  return { upstream, llama, proxy };
}

function bodyOf(name: string, turns: number, extra = ''): string {
  const messages = [{ role: 'system', content: 'You are a coding agent.' }];
  for (let turn = 0; turn < turns; turn++) messages.push({ role: 'user', content: `${name}: turn ${turn}` }, { role: 'assistant', content: `done ${turn}` });
  messages.push({ role: 'user', content: `${name}: turn ${turns}` });
  return `{"model":"m",${extra}"seed":18446744073709551615,"messages":${JSON.stringify(messages)}}`;
}

async function post(url: string, body: string, credential?: string): Promise<number> {
  const authorization = credential === undefined ? {} : { authorization: `Bearer ${credential}` };
  const response = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...authorization }, body });
  await response.arrayBuffer();
  return response.status;
}

describe('upstream.slots: auto', () => {
  it('sends each of 4 conversations to its own slot, every turn, with the rest of the client bytes intact', async () => {
    const { upstream, llama, proxy } = await setUp({ slots: 4 });
    for (let turn = 0; turn < 3; turn++) for (const name of ['a', 'b', 'c', 'd']) expect(await post(proxy.url, bodyOf(name, turn))).toBe(200);
    const chats = upstream.requestsTo('/v1/chat/completions');
    const slotOf = (index: number): unknown => (chats[index]!.json as { id_slot?: unknown }).id_slot;
    expect([0, 1, 2, 3].map(slotOf).sort()).toEqual([0, 1, 2, 3]);
    for (let index = 4; index < 12; index++) expect(slotOf(index)).toBe(slotOf(index % 4));
    expect(chats[0]!.body.toString()).toBe(`{"id_slot":${String(slotOf(0))},${bodyOf('a', 0).slice(1)}`);
    expect(llama.model.counters.busyPins).toBe(0);
    const line = await proxy.logs.request((entry) => entry['route'] === 'chat');
    expect(line['slot']).toEqual(expect.any(Number));
  });

  it('never has two requests in flight on one slot: a conversation sending two at once gets them one after the other', async () => {
    const { llama, proxy } = await setUp({ slots: 2, msPerGeneratedToken: 3 });
    const statuses = await Promise.all([0, 1, 2].map(() => post(proxy.url, bodyOf('a', 1))));
    expect(statuses).toEqual([200, 200, 200]);
    expect(llama.model.counters.busyPins).toBe(0);
    expect(new Set(llama.tasks.map((task) => task.slot)).size).toBe(1);
  });

  it("bounds a turn's wait for its busy home slot by the prefill speed the server's timings taught the ledger, not upstream.slot_wait_ms (issue 33 item 4)", async () => {
    // timings.prompt_ms = prompt_n × 0.01 ms (llama-server's timings, test/fixtures/llama-server/): a few hundred tokens re-read in a few ms.
    const { upstream, llama, proxy } = await setUp({ slots: 2, msPerPromptToken: 0.01, msPerGeneratedToken: 0.01 }, { slot_wait_ms: 600_000 });
    expect(await post(proxy.url, bodyOf('a', 0))).toBe(200);
    let release!: () => void;
    llama.holdAnswers = new Promise<void>((resolve) => (release = resolve));
    const first = post(proxy.url, bodyOf('a', 1));
    // The same conversation again while its home slot is busy: it must not wait the 10 minutes of slot_wait_ms.
    let second: Promise<number> | undefined;
    try {
      await upstream.waitFor(() => llama.tasks.length === 2, { what: "a's turn running in its home slot" });
      second = post(proxy.url, bodyOf('a', 1));
      await upstream.waitFor(() => llama.tasks.length === 3, { what: 'the second turn moved to the free slot' });
      expect(llama.tasks[2]!.slot).not.toBe(llama.tasks[1]!.slot);
    } finally {
      // Held answers are let go also when the test fails, so the proxy and the double close.
      release();
    }
    expect(await Promise.all([first, second])).toEqual([200, 200]);
    expect(llama.model.counters.busyPins).toBe(0);
  });

  it('gives two credentials sending the same conversation two home slots, without auth.keys (issue 33 item 3)', async () => {
    const { upstream, proxy } = await setUp({ slots: 4 });
    for (const credential of ['key-one', 'key-two', 'key-one', 'key-two']) expect(await post(proxy.url, bodyOf('a', 0), credential)).toBe(200);
    const slots = upstream.requestsTo('/v1/chat/completions').map((request) => (request.json as { id_slot?: unknown }).id_slot);
    expect(slots[0]).not.toBe(slots[1]);
    expect(slots.slice(2)).toEqual(slots.slice(0, 2));
  });

  it('leaves a request that carries its own id_slot alone', async () => {
    const { upstream, proxy } = await setUp({ slots: 2 });
    const body = bodyOf('a', 0, '"id_slot":1,');
    expect(await post(proxy.url, body)).toBe(200);
    expect(upstream.requestsTo('/v1/chat/completions')[0]!.body.toString()).toBe(body);
  });

  it('schedules nothing on a single-slot server without slot_save, and nothing with upstream.slots off', async () => {
    const single = await setUp({ slots: 1 });
    await post(single.proxy.url, bodyOf('a', 0));
    expect((single.upstream.requestsTo('/v1/chat/completions')[0]!.json as { id_slot?: unknown }).id_slot).toBeUndefined();
    const off = await setUp({ slots: 4 }, { slots: 'off' });
    await post(off.proxy.url, bodyOf('a', 0));
    expect(off.upstream.requestsTo('/props')).toHaveLength(0);
    expect((off.upstream.requestsTo('/v1/chat/completions')[0]!.json as { id_slot?: unknown }).id_slot).toBeUndefined();
  });

  it("makes no AbortSignal for a request that is not scheduled, nor for one that gets its slot at once (issue 40: 1% of a small request's CPU)", async () => {
    const made = vi.spyOn(ExchangeAbort.prototype, 'signal', 'get');
    try {
      const single = await setUp({ slots: 1 });
      expect(await post(single.proxy.url, bodyOf('a', 0))).toBe(200);
      const four = await setUp({ slots: 4 });
      expect(await post(four.proxy.url, bodyOf('a', 0))).toBe(200);
      expect(four.llama.tasks).toHaveLength(1);
      expect(made).not.toHaveBeenCalled();
    } finally {
      made.mockRestore();
    }
  });

  it('with slot_save and more conversations than slots, saves the evicted one and restores it when it returns', async () => {
    const { llama, proxy } = await setUp({ slots: 1, slotSave: true, cacheRamTokens: 0 }, { slot_save: true });
    for (const name of ['a', 'b']) await post(proxy.url, bodyOf(name, 0));
    await post(proxy.url, bodyOf('a', 1));
    expect(llama.actions.map((action) => action.split(' ')[0])).toEqual(['save', 'save', 'restore']);
    const last = llama.tasks.at(-1)!;
    // The restored slot holds a's first turn: only the new part is read.
    expect(last.cacheN).toBeGreaterThan(last.promptN);
  });
});

describe('upstream.slots: auto, with compaction', () => {
  it("runs a conversation's summaries on its own slot, never beside its next turn, also with a credential per conversation", async () => {
    const upstream = track(await FakeUpstream.start());
    const llama = new SlotLlama(upstream, { slots: 2, window: 8000, msPerGeneratedToken: 2 });
    const proxy = track(await startProxy(upstream, { listen: true, config: { upstream: { slots: 'auto' }, compaction: { enabled: true } } }));
    const long = (name: string, turns: number): string => {
      const messages = [{ role: 'system', content: 'You are a coding agent.' }];
      for (let turn = 0; turn < turns; turn++) messages.push({ role: 'user', content: `${name} ${turn} `.padEnd(1200, 'x') }, { role: 'assistant', content: `done ${turn}` });
      messages.push({ role: 'user', content: `${name}: turn ${turns}` });
      return JSON.stringify({ model: 'm', messages });
    };
    for (let turn = 0; turn < 24; turn++) {
      // Each conversation with a credential of its own, and no auth.keys: the slot's key and the epochs' are one tenant's.
      await Promise.all(['a', 'b'].map((name) => post(proxy.url, long(name, turn), `key-${name}`)));
    }
    const chats = upstream.requestsTo('/v1/chat/completions').map((request) => request.json as { id_slot?: number; messages: Array<{ content: string }> });
    const isSummary = (body: { messages: Array<{ content: string }> }): boolean => body.messages.some((message) => /handoff notes|earlier notes/.test(String(message.content)));
    // Suffix-mode summaries: the conversation as forwarded, plus the instruction (prepend mode starts with its own system prompt).
    const summaries = chats.filter((body) => isSummary(body) && body.messages[0]?.content === 'You are a coding agent.');
    expect(summaries.length).toBeGreaterThan(0);
    const slotOf = (name: string): number | undefined => chats.find((body) => !isSummary(body) && String(body.messages[1]?.content).startsWith(`${name} `))?.id_slot;
    for (const summary of summaries) {
      const name = String(summary.messages[1]?.content).split(' ')[0]!;
      expect(summary.id_slot).toBe(slotOf(name));
    }
    expect(llama.model.counters.busyPins).toBe(0);
  });
});

describe('upstream.slots: observable', () => {
  it('publishes per slot its queue length and waits, and the saves, restores and evictions, at /metrics', async () => {
    const { proxy } = await setUp({ slots: 1, slotSave: true, cacheRamTokens: 0 }, { slot_save: true });
    for (const name of ['a', 'b', 'a']) await post(proxy.url, bodyOf(name, 0));
    const text = await (await fetch(`${proxy.url}/metrics`)).text();
    expect(text).toContain('compactor_slot_queue_length{model="sim.gguf",slot="0"} 0');
    expect(text).toContain('compactor_slot_queue_length{model="sim.gguf",slot="any"} 0');
    expect(text).toContain('compactor_slot_waits_total{model="sim.gguf",slot="0"} 3');
    expect(text).toMatch(/compactor_slot_wait_seconds_total\{model="sim.gguf",slot="0"\} \d/);
    expect(text).toMatch(/compactor_slot_wait_seconds_max\{model="sim.gguf",slot="0"\} \d/);
    expect(text).toContain('compactor_slot_saves_total{model="sim.gguf"} 2');
    expect(text).toContain('compactor_slot_restores_total{model="sim.gguf"} 1');
    expect(text).toContain('compactor_slot_evictions_total{model="sim.gguf"} 2');
    expect(text).toContain('compactor_slot_moves_total{model="sim.gguf"} 0');
  });

  it("shows each conversation's slot in its dashboard row", async () => {
    const { proxy } = await setUp({ slots: 4 });
    for (const name of ['a', 'b']) await post(proxy.url, bodyOf(name, 0));
    const state = (await (await fetch(`${proxy.url}/dashboard/state`)).json()) as { conversations: Array<{ slot: unknown }> };
    expect(state.conversations.map((conversation) => conversation.slot).sort()).toEqual([0, 1]);
  });
});
