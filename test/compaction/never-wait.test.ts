import { describe, expect, it, vi } from 'vitest';
import type { ChatMessage } from '../../src/transcript/message.js';
import { isMarked } from '../../src/transcript/marks.js';
import { findPairProblems } from '../../src/transcript/pairs.js';
import { conversation, factOf, factsIn, turnMessages } from '../support/conversation.js';
import { manualClock } from '../support/manual-clock.js';
import { compactorWith, SummarizerDouble } from '../support/compaction.js';
import { JsonUpstreamDouble } from '../support/json-upstream-double.js';
import { chatRequestView } from '../../src/formats/chat/read.js';

/**
 * Issue 13, "Never forget, never wait": a truncation is never the ground a
 * later epoch is built on, and background summaries never make a foreground
 * request wait behind them.
 */

/** 14 turns sit between the soft threshold and the threshold of the default 8k window; 20 cross it. */
const SOFT_TURNS = 14;
const CROSSING_TURNS = 20;

const prepare = (compactor: ReturnType<typeof compactorWith>['compactor'], messages: ChatMessage[]) =>
  compactor.compact({ request: chatRequestView({ model: 'm', messages }), tenant: '', signal: new AbortController().signal });

/** A conversation of its own: a different system message gives it a different prefix. */
const conversationNumber = (number: number, turns: number) => conversation({ turns, system: `You are coding agent number ${number}.` });

/** The history after the assistant answers the last turn and the next turn's user message arrives. */
function nextRequest(messages: ChatMessage[], turn: number): ChatMessage[] {
  const full = turnMessages(turn - 1, { turns: turn });
  return [...messages, ...full.slice(1), turnMessages(turn, { turns: turn })[0]!];
}

describe('issue 13 item 7: a truncation becomes permanent', () => {
  it('item 7: after the back-off, the next epoch is summarized from the messages the truncation dropped: every fact is back', async () => {
    const clock = manualClock();
    const summarizer = new SummarizerDouble();
    summarizer.failures = 2; // suffix, then prepend: one failed try
    const { compactor } = compactorWith({}, { summarizer, now: clock.now });
    let messages = conversation({ turns: CROSSING_TURNS });
    const truncated = await prepare(compactor, messages);
    expect(isMarked(truncated.messages[1]!, 'truncated')).toBe(true);

    // The back-off is over (a minute), the truncation still stands (five minutes); the summarizer is healthy.
    clock.advance(61_000);
    let turn = CROSSING_TURNS;
    const calls = summarizer.calls;
    let forwarded: ChatMessage[] = truncated.messages;
    while (turn < CROSSING_TURNS + 40 && (summarizer.calls === calls || compactor.runningSummaries > 0 || forwarded.some((message) => isMarked(message, 'truncated')))) {
      turn++;
      messages = nextRequest(messages, turn);
      const prepared = await prepare(compactor, messages);
      forwarded = prepared.messages;
      prepared.afterResponse?.();
      await vi.waitFor(() => expect(compactor.runningSummaries).toBe(0));
    }
    expect(summarizer.calls).toBeGreaterThan(calls);
    expect(forwarded.some((message) => isMarked(message, 'truncated'))).toBe(false);
    const text = JSON.stringify(forwarded);
    for (let planted = 1; planted <= turn; planted++) expect(text).toContain(factOf(planted));
  });
});

describe('issue 13 item 7: an upstream killed mid-summary', () => {
  it('item 7: killed mid-summary and back 50 ms later, the conversation is truncated once, then every fact comes back', async () => {
    const clock = manualClock();
    const summarizer = new SummarizerDouble();
    summarizer.delayMs = 5;
    let down = false;
    let killed = false;
    summarizer.answer = (prompt) => {
      if (!killed) {
        // The first summary call dies with the upstream; it is back 50 ms later.
        killed = down = true;
        setTimeout(() => (down = false), 50);
        throw new Error('socket hang up');
      }
      if (down) throw new Error('connect ECONNREFUSED');
      return { choices: [{ message: { role: 'assistant', content: `NOTES: ${[...factsIn(prompt)].join(' ')}` } }] };
    };
    const truncations: number[] = [];
    const { compactor } = compactorWith(
      {},
      {
        summarizer,
        now: clock.now,
        observer: { compaction: (event) => event.outcome === 'truncated' && truncations.push(1), summary: () => {}, epochLookup: () => {} },
      },
    );
    let messages = conversation({ turns: CROSSING_TURNS });
    let forwarded = (await prepare(compactor, messages)).messages;
    let turn = CROSSING_TURNS;
    for (let step = 0; step < 30; step++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      clock.advance(10_000);
      turn++;
      messages = nextRequest(messages, turn);
      const prepared = await prepare(compactor, messages);
      forwarded = prepared.messages;
      prepared.afterResponse?.();
      await vi.waitFor(() => expect(compactor.runningSummaries).toBe(0));
    }
    expect(truncations).toHaveLength(1);
    expect(forwarded.some((message) => isMarked(message, 'truncated'))).toBe(false);
    const text = JSON.stringify(forwarded);
    for (let planted = 1; planted <= turn; planted++) expect(text).toContain(factOf(planted));
  });
});

describe('issue 13 item 8: background summaries starve the foreground', () => {
  it('item 8: a request crossing the threshold goes before 60 queued background summaries and is not truncated', async () => {
    const summarizer = new SummarizerDouble();
    summarizer.delayMs = 20;
    // A timeout far shorter than 60 queued summaries (1.2 s), far longer than one call (20 ms).
    // One tenant's 60 conversations: its queue limit raised so all 60 wait in line (issue 21 bounds it by default).
    const { compactor } = compactorWith({ compaction: { summary: { timeout_ms: 400, max_queued_per_tenant: 100, max_queued_background: 100 } } }, { summarizer });
    for (let number = 1; number <= 60; number++) {
      const prepared = await prepare(compactor, conversationNumber(number, SOFT_TURNS));
      expect(prepared.afterResponse).toBeTypeOf('function');
      prepared.afterResponse!();
    }
    expect(compactor.runningSummaries).toBe(60);

    const crossing = await prepare(compactor, conversationNumber(0, CROSSING_TURNS));
    expect(isMarked(crossing.messages[1]!, 'summary')).toBe(true);
    expect(crossing.report).toMatch(/^summarized /);
    // Its summary call came right after the one already running, not after the 60 queued.
    const order = summarizer.bodies.findIndex((body) => JSON.stringify(body['messages']).includes('coding agent number 0.'));
    expect(order).toBeLessThanOrEqual(1);
    await vi.waitFor(() => expect(compactor.runningSummaries).toBe(0), { timeout: 10_000 });
  });
});

/** The 48-turn agent conversation of the issue (bench/crossings.ts): 3 steps a turn, and every sixth turn one ~9k-token result. */
const AGENT_SHAPE = { turns: 48, stepsPerTurn: 3, resultBytes: 1500, largeResultEvery: 6, largeResultBytes: 28_800 };

/** Runs the 48 turns on a 32k window, each request's background work done before the next: the waits for a summary, and the forwarded histories. */
async function agentRun(): Promise<{ waits: number[]; forwarded: ChatMessage[][] }> {
  const waits: number[] = [];
  const observer = { compaction: () => {}, summary: () => {}, epochLookup: () => {}, summaryWait: (milliseconds: number) => waits.push(milliseconds) };
  const { compactor } = compactorWith({}, { upstream: JsonUpstreamDouble.llamaServer({ window: 32_768 }), observer });
  let history: ChatMessage[] = [{ role: 'system', content: 'You are a careful coding agent.' }];
  const forwarded: ChatMessage[][] = [];
  for (let turn = 1; turn <= AGENT_SHAPE.turns; turn++) {
    const messages = turnMessages(turn, AGENT_SHAPE);
    history = [...history, messages[0]!];
    const prepared = await prepare(compactor, history);
    forwarded.push(prepared.messages);
    prepared.afterResponse?.();
    await vi.waitFor(() => expect(compactor.runningSummaries).toBe(0));
    history = [...history, ...messages.slice(1)];
  }
  return { waits, forwarded };
}

describe('issue 13 item 9: the crossing should not wait when it was foreseeable', () => {
  it('item 9: in the 48-turn agent conversation on a 32k window, no request waits for a summary', async () => {
    const { waits, forwarded } = await agentRun();
    expect(forwarded.some((messages) => messages.some((message) => isMarked(message, 'summary')))).toBe(true);
    expect(waits).toEqual([]);
  });
});

describe('issue 13 item 10: keep what the model needs now', () => {
  it('item 10: when the last complete turn alone exceeds keep_recent, its last steps stay raw (cut at a step boundary), not only the last user message', async () => {
    const { compactor, summarizer } = compactorWith({}, { upstream: JsonUpstreamDouble.llamaServer({ window: 32_768 }) });
    // Turn 14 is an agent loop of 30 steps: alone it is larger than keep_recent (a quarter of the 31.7k budget), even pruned.
    const shape = { stepsPerTurn: 3, resultBytes: 1500 };
    const messages = [
      ...conversation({ ...shape, turns: 14 }),
      ...turnMessages(14, { ...shape, turns: 14, stepsPerTurn: 30 }).slice(1),
      turnMessages(15, { ...shape, turns: 15 })[0]!,
    ];
    const prepared = await prepare(compactor, messages);
    expect(summarizer.calls).toBeGreaterThan(0);
    const forwarded = prepared.messages;
    expect(isMarked(forwarded[1]!, 'summary')).toBe(true);
    const kept = forwarded.slice(3);
    expect(kept.length).toBeGreaterThan(1);
    // The turn's task stays, then its last steps raw, each call with its result, then the new user message.
    expect(kept[0]).toBe(messages.find((message) => message.role === 'user' && String(message.content).startsWith('Turn 14:')));
    expect(kept[1]!.role).toBe('assistant');
    expect(kept.some((message) => message.role === 'tool' && message.tool_call_id === 'call_14_30')).toBe(true);
    expect(kept.some((message) => message.role === 'tool' && message.tool_call_id === 'call_14_1')).toBe(false);
    expect(kept.at(-1)).toBe(messages.at(-1));
    expect(findPairProblems(forwarded)).toEqual([]);
    // The roles still alternate where the summary pair meets the kept turn.
    expect(forwarded.slice(1, 5).map((message) => message.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
  });

  it('item 10: measures kept turns after pruning their old tool results: a turn kept only once its large result is pruned goes pruned', async () => {
    const { compactor } = compactorWith({}, { upstream: JsonUpstreamDouble.llamaServer({ window: 32_768 }) });
    // Turn 18 carries a ~9k-token result, turn 19 is small: with that result pruned, turns 17 and 18 fit keep_recent whole.
    const messages = conversation({ ...AGENT_SHAPE, turns: 20 });
    const prepared = await prepare(compactor, messages);
    const forwarded = prepared.messages;
    expect(isMarked(forwarded[1]!, 'summary')).toBe(true);
    const kept = forwarded.slice(3);
    const startOf = (turn: number) => kept.findIndex((message) => message.role === 'user' && String(message.content).startsWith(`Turn ${turn}:`));
    expect(startOf(18)).toBeGreaterThanOrEqual(0);
    const large = kept.find((message) => message.role === 'tool' && message.tool_call_id === 'call_18_1')!;
    expect(String(large.content)).toContain('bytes elided');
    // The newest complete turn's small results stay whole, and the new user message is the last.
    expect(kept.find((message) => message.tool_call_id === 'call_19_3')).toBe(messages.find((message) => message.tool_call_id === 'call_19_3'));
    expect(kept.at(-1)).toBe(messages.at(-1));
    expect(findPairProblems(forwarded)).toEqual([]);
  });
});
