import { describe, expect, it } from 'vitest';
import { conversation } from '../../support/conversation.js';
import { FakeUpstream } from '../../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../../support/proxy.js';
import { SimulatedLlama } from '../../support/simulated-llama.js';

/**
 * Failures are seen (issue 22, item 5): in observe mode on a 4,096-token
 * window, requests the upstream refuses (`exceed_context_size_error`) are
 * counted per conversation on the dashboard and logged at warn; the header
 * says `would prune …` where compact mode would prune.
 */

const closed = closedAfterEachTest();

interface State {
  conversations: { id: string; requests: number; refused: number; failed: number }[];
  totals: { requests: number; refused: number; failed: number };
}

describe('refused and failed requests', () => {
  it('observe mode: refusals counted per conversation and logged at warn; the header says what would be pruned', async () => {
    const upstream = closed(await FakeUpstream.start());
    new SimulatedLlama(upstream, { window: 4096 });
    const proxy = closed(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true, mode: 'observe' }, dashboard: { enabled: true } } }));
    const statuses: number[] = [];
    const reports: string[] = [];
    for (let turns = 1; turns <= 10; turns++) {
      const messages = conversation({ turns, stepsPerTurn: 2, resultBytes: 1_000, largeResultEvery: 2, largeResultBytes: 40_000 });
      const response = await fetch(`${proxy.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'sim', messages }) });
      statuses.push(response.status);
      reports.push(response.headers.get('x-compactor') ?? '');
      await response.arrayBuffer();
    }
    // Refusals and failures are counted with the request's line, a turn after its response closed.
    await proxy.logs.requestLines(10);
    const refusals = statuses.filter((status) => status === 400).length;
    expect(refusals).toBeGreaterThan(0);
    expect(reports.some((report) => /^observe: would prune 1 oversized tool result, /.test(report))).toBe(true);

    const state = (await (await fetch(`${proxy.url}/dashboard/state`)).json()) as State;
    expect(state.conversations).toHaveLength(1);
    expect(state.conversations[0]).toMatchObject({ requests: 10, refused: refusals, failed: 0 });
    expect(state.totals).toMatchObject({ requests: 10, refused: refusals, failed: 0 });

    const refusedLines = proxy.logs.requests().filter((line) => line['status'] === 400);
    expect(refusedLines).toHaveLength(refusals);
    // pino's warn level is 40.
    for (const line of refusedLines) expect(line['level']).toBe(40);
  });

  it('a failed request (upstream unreachable) is counted as failed on its conversation', async () => {
    const upstream = await FakeUpstream.start();
    const url = upstream.url;
    await upstream.close();
    const proxy = closed(await startProxy({ url } as FakeUpstream, { listen: true, config: { dashboard: { enabled: true } } }));
    const response = await fetch(`${proxy.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'sim', messages: [{ role: 'user', content: 'hi' }] }) });
    expect(response.status).toBe(502);
    await response.arrayBuffer();
    await proxy.logs.requestLines(1);
    const state = (await (await fetch(`${proxy.url}/dashboard/state`)).json()) as State;
    expect(state.conversations[0]).toMatchObject({ requests: 1, refused: 0, failed: 1 });
    expect(state.totals).toMatchObject({ failed: 1 });
  });
});
