import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../../src/transcript/message.js';
import { conversation } from '../../support/conversation.js';
import { FakeUpstream } from '../../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../../support/proxy.js';
import { SimulatedLlama } from '../../support/simulated-llama.js';

/**
 * Issue 21 item 7: without `auth.keys`, `dashboard.show_text: true` showed
 * every tenant's notes to anyone ("no auth" was "admin"). Notes now reach
 * only the tenant that wrote them (the same credential), unless an admin key
 * asks.
 */

const opened = closedAfterEachTest();

interface State {
  compactions: { report: string; notes?: string }[];
}

describe('issue 21 item 7: notes only for the tenant that wrote them', () => {
  it('without auth.keys and with show_text, another credential (or none) sees the compaction but not its notes', async () => {
    const upstream = opened(await FakeUpstream.start());
    new SimulatedLlama(upstream, { window: 8_192 });
    const proxy = opened(await startProxy(upstream, { config: { compaction: { enabled: true }, dashboard: { show_text: true } } }));
    const messages: ChatMessage[] = conversation({ turns: 20, stepsPerTurn: 2, resultBytes: 400 });
    const writer = { authorization: 'Bearer sk-writer' };
    const answer = await proxy.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { 'content-type': 'application/json', ...writer }, payload: { model: 'sim', messages } });
    expect(answer.headers['x-compactor']).toMatch(/^summarized/);
    // The dashboard hears of the answer in its usage hook, a turn before the request's line.
    await proxy.logs.requestLines(1);
    const stateAs = async (headers: Record<string, string>) => (await proxy.app.inject({ method: 'GET', url: '/dashboard/state', headers })).json() as State;

    const own = await stateAs(writer);
    expect(own.compactions[0]?.notes).toMatch(/FACT-1\b/);
    for (const stranger of [{}, { authorization: 'Bearer sk-someone-else' }]) {
      const seen = await stateAs(stranger);
      expect(JSON.stringify(seen)).not.toMatch(/FACT-|Turn \d+/);
    }
  });
});
