import { describe, expect, it, vi } from 'vitest';
import type { ChatMessage } from '../../src/transcript/message.js';
import { isMarked } from '../../src/transcript/marks.js';
import { conversation } from '../support/conversation.js';
import { compactorWith, SummarizerDouble } from '../support/compaction.js';

/**
 * Issue 13, "Never forget, never wait": background summaries never make a
 * foreground request wait behind them.
 */

/** 14 turns sit between the soft threshold and the threshold of the default 8k window; 20 cross it. */
const SOFT_TURNS = 14;
const CROSSING_TURNS = 20;

const prepare = (compactor: ReturnType<typeof compactorWith>['compactor'], messages: ChatMessage[]) =>
  compactor.prepare({ body: { model: 'm', messages }, messages, tenant: '', signal: new AbortController().signal });

/** A conversation of its own: a different system message gives it a different prefix. */
const conversationNumber = (number: number, turns: number) => conversation({ turns, system: `You are coding agent number ${number}.` });

describe('issue 13 item 8: background summaries starve the foreground', () => {
  it('item 8: a request crossing the threshold goes before 60 queued background summaries and is not truncated', async () => {
    const summarizer = new SummarizerDouble();
    summarizer.delayMs = 20;
    // A timeout far shorter than 60 queued summaries (1.2 s), far longer than one call (20 ms).
    const { compactor } = compactorWith({ compaction: { summary: { timeout_ms: 400 } } }, { summarizer });
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
