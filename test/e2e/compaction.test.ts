import { describe, expect, it } from 'vitest';
import { contentText, type ChatMessage } from '../../src/transcript/message.js';
import { findPairProblems } from '../../src/transcript/pairs.js';
import { estimateRequestTokens } from '../../src/transcript/tokens.js';
import { isRealUserMessage } from '../../src/transcript/groups.js';
import { FakeUpstream } from '../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';
import { SimulatedLlama, type PromptRecord } from '../support/simulated-llama.js';
import { AGENT_TOOLS, factsBefore, runAgent } from './agent-run.js';

/**
 * The compaction engine through the real proxy, against a simulated
 * llama-server with a 32k window, a tokenizer 25% above bytes/4 and a
 * one-slot prefix cache: the figures issue 4 asks for.
 */

const WINDOW = 32_768;
const RESERVE = 1024;

const opened = closedAfterEachTest();

function lastRealUser(messages: readonly ChatMessage[]): ChatMessage | undefined {
  return messages.findLast((message) => isRealUserMessage(message));
}

function reuse(records: readonly PromptRecord[]): number {
  const prompt = records.reduce((sum, record) => sum + record.promptTokens, 0);
  const cached = records.reduce((sum, record) => sum + record.cacheTokens, 0);
  return prompt === 0 ? 0 : cached / prompt;
}

describe('compaction through the proxy (simulated llama-server, 32k window)', () => {
  it('runs a 45-turn agent conversation with 30 KB results: no 400, one summary per epoch, stable prefixes, KV reuse, facts kept', async () => {
    const upstream = opened(await FakeUpstream.start());
    const llama = new SimulatedLlama(upstream, { window: WINDOW });
    const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true } } }));
    const exchanges = await runAgent({
      baseUrl: proxy.url,
      turns: 45,
      stepsPerTurn: 2,
      resultBytes: 1500,
      largeResultEvery: 7,
      largeResultBytes: 30_000,
      tools: AGENT_TOOLS,
    });

    expect(exchanges.every((exchange) => exchange.status === 200)).toBe(true);
    expect(llama.records.filter((record) => record.status === 400)).toEqual([]);
    const chats = llama.chatRecords;
    expect(chats).toHaveLength(exchanges.length);
    // Room for the answer, every time.
    for (const record of chats) expect(record.promptTokens + RESERVE).toBeLessThanOrEqual(WINDOW);

    const firstCompacted = chats.findIndex((record) => record.messages.some((message) => contentText(message.content).startsWith('[compacted:')));
    expect(firstCompacted).toBeGreaterThan(0);
    const after = chats.slice(firstCompacted);

    // Summaries: at most one per epoch (each summary makes one epoch, and each epoch shows up as a new summary pair).
    const epochs = new Set(after.map((record) => contentText(record.messages[1]?.content ?? '')).filter((text) => text.startsWith('[compacted:summary]')));
    expect(llama.summaryRecords.length).toBeGreaterThan(0);
    expect(llama.summaryRecords.length).toBeLessThanOrEqual(epochs.size + 1);

    // The forwarded prefix stays byte-identical from one request to the next.
    let stable = 0;
    for (let index = 1; index < after.length; index++) {
      const previous = after[index - 1]!.prompt.replace(/<\|im_start\|>assistant\n$/, '');
      if (after[index]!.prompt.startsWith(previous)) stable++;
    }
    const stableShare = stable / (after.length - 1);
    expect(stableShare).toBeGreaterThanOrEqual(0.75);

    // The upstream reuses its KV cache, for the conversation and for the summaries.
    expect(reuse(after)).toBeGreaterThanOrEqual(0.8);
    expect(reuse(llama.summaryRecords)).toBeGreaterThanOrEqual(0.8);

    // Facts of old turns reach every later prompt; the last user message is always verbatim; pairs stay valid.
    exchanges.forEach((exchange, index) => {
      const record = chats[index]!;
      for (const fact of factsBefore(exchange.turn)) expect(record.prompt).toContain(fact);
      expect(lastRealUser(record.messages)).toEqual(lastRealUser(exchange.sent));
      expect(findPairProblems(record.messages)).toEqual([]);
    });
    console.info(
      `agent run: ${exchanges.length} requests, ${llama.summaryRecords.length} summary calls, ${epochs.size} epochs, ` +
        `stable prefix ${(stableShare * 100).toFixed(0)}%, KV reuse ${(reuse(after) * 100).toFixed(0)}% (summaries ${(reuse(llama.summaryRecords) * 100).toFixed(0)}%)`,
    );
  });

  it('shares one summary call among three concurrent identical requests', async () => {
    const upstream = opened(await FakeUpstream.start());
    const llama = new SimulatedLlama(upstream, { window: 8192, summaryDelayMs: 100 });
    const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true } } }));
    const history: ChatMessage[] = [{ role: 'system', content: 'You are terse.' }];
    for (let turn = 1; turn <= 40; turn++) {
      history.push({ role: 'user', content: `Turn ${turn}: FACT-${turn} ${'detail '.repeat(60)}` }, { role: 'assistant', content: `Noted ${turn}.` });
    }
    history.push({ role: 'user', content: 'What do you remember?' });
    const send = () =>
      fetch(`${proxy.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'sim', messages: history }),
      });
    const responses = await Promise.all([send(), send(), send()]);
    expect(responses.map((response) => response.status)).toEqual([200, 200, 200]);
    expect(llama.summaryRecords).toHaveLength(1);
    // The request that started the summary reports it; the others waited for that epoch and report reusing it.
    const reports = responses.map((response) => response.headers.get('x-compactor') ?? '');
    expect(reports.filter((report) => /^summarized \d+ messages/.test(report))).toHaveLength(1);
    expect(reports.filter((report) => /^epoch reused \(/.test(report))).toHaveLength(2);
  });

  it('never forwards a fresh conversation without room for the answer, even one just under the threshold by bytes/4', async () => {
    for (const tokensPerByte of [1.25 / 4, 1.8 / 4]) {
      const upstream = opened(await FakeUpstream.start());
      const llama = new SimulatedLlama(upstream, { window: 8192, tokensPerByte });
      const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true } } }));
      // Just under the threshold (0.85 of the 7168-token budget) by bytes/4: over the budget by this tokenizer's count.
      const history: ChatMessage[] = [{ role: 'system', content: 'You are terse.' }];
      let turn = 0;
      while (estimateRequestTokens({ messages: history }) < 0.84 * 7168 - 200) {
        turn++;
        history.push({ role: 'user', content: `Turn ${turn}: FACT-${turn} ${'detail '.repeat(40)}` }, { role: 'assistant', content: `Noted ${turn}.` });
      }
      history.push({ role: 'user', content: 'Go on.' });
      expect(estimateRequestTokens({ messages: history })).toBeLessThan(0.85 * 7168);
      expect(llama.tokensOf(llama.render({ messages: history }))).toBeGreaterThan(7168);
      const response = await fetch(`${proxy.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'sim', messages: history }),
      });
      expect(response.status).toBe(200);
      for (const record of llama.chatRecords) expect(record.promptTokens + RESERVE).toBeLessThanOrEqual(8192);
      expect(llama.records.filter((record) => record.status === 400)).toEqual([]);
    }
  });

  it('answers context_length_exceeded in OpenAI shape, forwarding nothing, when the last turn alone cannot fit', async () => {
    const upstream = opened(await FakeUpstream.start());
    const llama = new SimulatedLlama(upstream, { window: 2048 });
    const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true } } }));
    const response = await fetch(`${proxy.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sim', messages: [{ role: 'user', content: 'word '.repeat(4000) }] }),
    });
    expect(response.status).toBe(400);
    const body = (await response.json()) as { error: { code: string; message: string; type: string } };
    expect(body.error.code).toBe('context_length_exceeded');
    expect(body.error.type).toBe('invalid_request_error');
    expect(body.error.message).toMatch(/context window is 2048 tokens/);
    expect(llama.chatRecords).toHaveLength(0);
  });
});
