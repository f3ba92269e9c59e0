import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/transcript/message.js';
import { FakeUpstream } from '../support/fake-upstream.js';
import { send } from '../support/http-client.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';
import { reReadTurn } from '../support/re-reads.js';
import { SimulatedLlama } from '../support/simulated-llama.js';

/** Issue 25, item 4: the compression tier in `x-compactor`, `/metrics` and the dashboard's state. */

const opened = closedAfterEachTest();

describe('the compression tier, reported and counted', () => {
  it('says compressed N tool results in x-compactor, counts tier="compress" in /metrics, and names the tier on the dashboard', async () => {
    const upstream = opened(await FakeUpstream.start());
    new SimulatedLlama(upstream, { window: 8192 });
    const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true } } }));
    let history: ChatMessage[] = [{ role: 'system', content: 'You are a careful coding agent.' }];
    const reports: string[] = [];
    for (let turn = 1; turn <= 10; turn++) {
      const messages = reReadTurn(turn);
      history = [...history, messages[0]!];
      const response = await fetch(`${proxy.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'sim', messages: history }) });
      expect(response.status).toBe(200);
      await response.text();
      const report = response.headers.get('x-compactor');
      if (report !== null) reports.push(report);
      history = [...history, ...messages.slice(1)];
    }
    expect(reports.find((report) => report.includes('compressed'))).toMatch(/compressed \d+ tool results \(\d+(\.\d)?k? -> \d+(\.\d)?k? tokens\)/);

    const metrics = (await send(`${proxy.url}/metrics`)).body.toString('utf8');
    expect(metrics).toMatch(/compactor_compactions_total\{model="sim",tier="compress",outcome="compacted"\} [1-9]/);
    expect(metrics).toMatch(/tier \(prune, compress, summary, steps, none\)/);

    const state = (await send(`${proxy.url}/dashboard/state`)).body.toString('utf8');
    const parsed = JSON.parse(state) as { conversations: Array<{ tiers: Record<string, number> }>; compactions: Array<{ tier: string }> };
    expect(parsed.conversations[0]!.tiers['compress']).toBeGreaterThan(0);
    expect(parsed.compactions.some((event) => event.tier === 'compress')).toBe(true);
  });
});
