import { describe, expect, it } from 'vitest';
import { findPairProblems } from '../../src/transcript/pairs.js';
import { conversation } from '../support/conversation.js';
import { FakeUpstream, replies } from '../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';
import { SimulatedLlama } from '../support/simulated-llama.js';

/**
 * Issue 12, item 2: `llama-server -c 8192 -np 4` gives each slot 2,048
 * tokens. With 1,024 tokens reserved for the answer and a 1,024-token summary
 * allowance, compactor answered its own 400 from turn 3 on, where
 * llama-server alone served turns 1-6. The reservation and the summary
 * allowance scale down with the window, so a 2k slot still works.
 */

const opened = closedAfterEachTest();

describe('a 2k slot (-c 8192 -np 4, as /props reports it)', () => {
  it('serves a 40-turn agent conversation with small results, every turn answered, every prompt within the slot', async () => {
    const upstream = opened(await FakeUpstream.start());
    const llama = new SimulatedLlama(upstream, { window: 2048 });
    // /props as llama-server reports it with -np 4: n_ctx per slot, four slots.
    upstream.route('GET', '/props', replies.json(200, { default_generation_settings: { n_ctx: 2048, params: {} }, total_slots: 4 }));
    const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true } } }));
    const statuses: number[] = [];
    for (let turn = 1; turn <= 40; turn++) {
      const messages = conversation({ turns: turn, resultBytes: 120 });
      const response = await fetch(`${proxy.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'sim', messages }),
      });
      await response.arrayBuffer();

      statuses.push(response.status);
    }
    expect(statuses.filter((status) => status !== 200).length, `statuses by turn: ${statuses.join(' ')}`).toBe(0);
    expect(llama.records.every((record) => record.status === 200)).toBe(true);
    for (const record of llama.records) expect(record.promptTokens + (record.maxTokens ?? 0)).toBeLessThanOrEqual(2048);
    for (const record of llama.chatRecords) expect(findPairProblems(record.messages)).toEqual([]);
    expect(llama.summaryRecords.length).toBeGreaterThan(0);
  });

  it('logs the window per model at discovery, and warns once that the slot is under 4k', async () => {
    const upstream = opened(await FakeUpstream.start());
    new SimulatedLlama(upstream, { window: 2048 });
    const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true } } }));
    for (let request = 0; request < 3; request++) {
      const response = await fetch(`${proxy.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'sim', messages: conversation({ turns: 2 }) }),
      });
      await response.arrayBuffer();
    }
    const lines = proxy.logs.entries();
    expect(lines.filter((line) => line['msg'] === 'context window found' && line['model'] === 'sim' && line['window'] === 2048)).toHaveLength(1);
    const warnings = lines.filter((line) => line['level'] === 40 && String(line['msg']).includes('under 4k'));
    expect(warnings).toHaveLength(1);
  });
});
