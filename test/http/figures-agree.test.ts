import { describe, expect, it } from 'vitest';
import { formatTokens } from '../../src/compaction/policy/report.js';
import type { ChatMessage } from '../../src/transcript/message.js';
import { conversation, turnMessages } from '../support/conversation.js';
import { FakeUpstream } from '../support/fake-upstream.js';
import { closedAfterEachTest, startProxy, type Proxy } from '../support/proxy.js';
import { SimulatedLlama } from '../support/simulated-llama.js';

/**
 * One number for "what the client sent" (issue 22, item 1): the report's
 * "before" is the history as the client sent it, before oversized results
 * were pruned; the report names that pruning; `/metrics`, the dashboard and
 * `/v1/compact` count the same number.
 */

const closed = closedAfterEachTest();
// A 4,096-token window and 40 KB tool results, as a new user tried it.
const SCRIPT = { turns: 12, stepsPerTurn: 2, resultBytes: 2_000, largeResultEvery: 3, largeResultBytes: 40_000 };

async function started(): Promise<{ proxy: Proxy; llama: SimulatedLlama }> {
  const upstream = closed(await FakeUpstream.start());
  const llama = new SimulatedLlama(upstream, { window: 4096 });
  const proxy = closed(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true }, dashboard: { enabled: true } } }));
  return { proxy, llama };
}

/** The report's "before" in tokens: `(21.5k -> …` → 21500, `(950 -> …` → 950. */
function beforeOf(report: string): number | null {
  const match = /\((\d+(?:\.\d)?)(k?) -> /.exec(report);
  if (match === null) return null;
  return Number(match[1]) * (match[2] === 'k' ? 1000 : 1);
}

async function post(url: string, body: unknown): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

function metric(text: string, name: string): number {
  const line = text.split('\n').find((row) => row.startsWith(`${name}{`));
  return line === undefined ? 0 : Number(line.split(' ').at(-1));
}

describe('what the client sent, one number everywhere', () => {
  it('the headers of a run add up to /metrics and the dashboard', async () => {
    const { proxy } = await started();
    const history: ChatMessage[] = [{ role: 'system', content: 'You are a careful coding agent.' }];
    let summed = 0;
    let rounding = 0;
    const reports: string[] = [];
    for (let turn = 1; turn <= SCRIPT.turns; turn++) {
      const messages = turnMessages(turn, SCRIPT);
      history.push(messages[0]!);
      const response = await post(`${proxy.url}/v1/chat/completions`, { model: 'sim', messages: history });
      expect(response.status).toBe(200);
      const answer = (await response.json()) as { usage: { prompt_tokens: number } };
      const report = response.headers.get('x-compactor');
      const before = report === null ? null : beforeOf(report);
      if (report !== null) reports.push(report);
      // A request with no figure in its header was forwarded as sent: the upstream's count is the client's.
      summed += before ?? answer.usage.prompt_tokens;
      if (before !== null && before >= 1000) rounding += 50;
      history.push(...messages.slice(1));
      // Background epochs finish before the next turn, as between an agent's turns: the answer's hooks (which
      // start the one it calls for) run before its request line is written.
      await proxy.logs.requestLines(turn);
      while ((proxy.app.proxy.engine?.runningSummaries ?? 0) > 0) await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const metrics = await (await fetch(`${proxy.url}/metrics`)).text();
    const counted = metric(metrics, 'compactor_client_prompt_tokens_total');
    expect(Math.abs(counted - summed)).toBeLessThanOrEqual(rounding);
    expect(reports.some((report) => report.startsWith('pruned 1 oversized tool result, '))).toBe(true);
    const state = (await (await fetch(`${proxy.url}/dashboard/state`)).json()) as { conversations: { points: { sent: number }[] }[] };
    const charted = state.conversations[0]!.points.reduce((sum, point) => sum + point.sent, 0);
    expect(charted).toBe(counted);
  });

  it('/v1/compact: tokens.before is the report\'s "before", and the report names the pruning', async () => {
    const { proxy } = await started();
    const messages = conversation({ turns: 10, stepsPerTurn: 2, resultBytes: 300, largeResultEvery: 9, largeResultBytes: 40_000 });
    const response = await post(`${proxy.url}/v1/compact`, { model: 'sim', messages, force: true });
    expect(response.status).toBe(200);
    const answer = (await response.json()) as { report: string; tokens: { before: number } };
    expect(answer.report).toMatch(/^pruned 1 oversized tool result, summarized \d+ messages -> 1 summary/);
    expect(answer.report).toContain(`(${formatTokens(answer.tokens.before)} -> `);
  });
});
