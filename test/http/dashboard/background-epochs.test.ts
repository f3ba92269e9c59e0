import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../../src/transcript/message.js';
import { turnMessages } from '../../support/conversation.js';
import { FakeUpstream } from '../../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../../support/proxy.js';
import { SimulatedLlama } from '../../support/simulated-llama.js';

/**
 * Epochs written in the background (the path the design is built around:
 * between the soft threshold and the threshold, after the answer) reach the
 * dashboard where they are written, with their tier, report, duration and,
 * with `show_text`, their notes (issue 22, item 3).
 */

const closed = closedAfterEachTest();

interface State {
  conversations: { id: string; epochs: number; tiers: Record<string, number> }[];
  compactions: { conversation: string; tier: string; report: string; milliseconds: number; background: boolean; notes?: string }[];
}

async function agentRun(showText: boolean): Promise<{ state: State; background: number }> {
  const upstream = closed(await FakeUpstream.start());
  new SimulatedLlama(upstream, { window: 4096 });
  const proxy = closed(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true }, dashboard: { enabled: true, show_text: showText } } }));
  const history: ChatMessage[] = [{ role: 'system', content: 'You are a careful coding agent.' }];
  for (let turn = 1; turn <= 14; turn++) {
    const messages = turnMessages(turn, { turns: 14, stepsPerTurn: 2, resultBytes: 600 });
    history.push(messages[0]!);
    const response = await fetch(`${proxy.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'sim', messages: history }) });
    expect(response.status).toBe(200);
    await response.arrayBuffer();
    history.push(...messages.slice(1));
    // The answer's hooks (which start the background epoch it calls for) run before its request line is written.
    await proxy.logs.requestLines(turn);
    while ((proxy.app.proxy.engine?.runningSummaries ?? 0) > 0) await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const background = proxy.logs.entries().filter((entry) => entry['pending'] === true && String(entry['msg']).startsWith('summarized')).length;
  const state = (await (await fetch(`${proxy.url}/dashboard/state`)).json()) as State;
  return { state, background };
}

describe('background epochs on the dashboard', () => {
  it('are counted on the conversation and listed with tier, report and duration', async () => {
    const { state, background } = await agentRun(false);
    expect(background).toBeGreaterThan(0);
    const [conversation] = state.conversations;
    expect(conversation!.epochs).toBeGreaterThanOrEqual(background);
    expect(conversation!.tiers['summary']).toBeGreaterThanOrEqual(background);
    const listed = state.compactions.filter((item) => item.background);
    expect(listed).toHaveLength(background);
    for (const item of listed) {
      expect(item).toMatchObject({ conversation: conversation!.id, tier: 'summary' });
      expect(item.report).toMatch(/^summarized \d+ messages -> 1 summary/);
      expect(item.milliseconds).toBeGreaterThanOrEqual(0);
      expect(item.notes).toBeUndefined();
    }
  });

  it('carry their notes with show_text', async () => {
    const { state } = await agentRun(true);
    const listed = state.compactions.filter((item) => item.background);
    expect(listed.length).toBeGreaterThan(0);
    for (const item of listed) expect(item.notes).toMatch(/FACT-\d+/);
  });
});
