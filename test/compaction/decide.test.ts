import { describe, expect, it } from 'vitest';
import { budgetOf } from '../../src/compaction/policy/budget.js';
import { type CandidateSizes, MAX_WAITS, decide, decisionSettingsOf } from '../../src/compaction/policy/decide.js';
import type { Epoch } from '../../src/compaction/types.js';
import { candidateOf } from '../../src/compaction/policy/plan.js';
import type { ChatMessage } from '../../src/transcript/message.js';
import { conversation } from '../support/conversation.js';
import { configWith } from '../support/compaction.js';

const settings = decisionSettingsOf(configWith().compaction);
const budget = budgetOf(8192, undefined, 1024, 1024); // 7168 tokens: soft zone from 4300, threshold 6093
const idle = { pending: null, running: false, attempt: 0 };

/** Every message the same size, so the total is chosen exactly. */
function sized(messages: readonly ChatMessage[], total: number): CandidateSizes {
  return { perMessage: messages.map(() => total / messages.length), fixed: 0, ratio: 1 };
}

const messages = conversation({ turns: 20 });
const candidate = candidateOf(messages, null);
const pending: Epoch = { key: 'k', sourceLength: 5, seenLength: 5, replacement: messages.slice(0, 3), notes: 'n', strategy: 'summary', report: '', pending: true };

describe('decide', () => {
  it('forwards under the soft threshold, and asks for the next epoch in the soft zone', () => {
    expect(decide(candidate, sized(messages, 3000), budget, idle, settings)).toMatchObject({ kind: 'forward', prepareNext: false });
    expect(decide(candidate, sized(messages, 5000), budget, idle, settings)).toMatchObject({ kind: 'forward', prepareNext: true });
  });

  it('applies a pending epoch once the threshold is crossed, before anything else', () => {
    expect(decide(candidate, sized(messages, 6500), budget, { ...idle, pending, running: true }, settings)).toEqual({ kind: 'apply-pending', epoch: pending });
    expect(decide(candidate, sized(messages, 5000), budget, { ...idle, pending }, settings).kind).toBe('forward');
  });

  it(`waits for a running summary of the conversation, at most ${MAX_WAITS} times`, () => {
    expect(decide(candidate, sized(messages, 6500), budget, { ...idle, running: true }, settings)).toEqual({ kind: 'wait' });
    expect(decide(candidate, sized(messages, 6500), budget, { ...idle, running: true, attempt: MAX_WAITS }, settings).kind).toBe('summary');
  });

  it('summarizes a crossed history with the boundary and counts to act on', () => {
    const decision = decide(candidate, sized(messages, 6500), budget, idle, settings);
    expect(decision.kind).toBe('summary');
    if (decision.kind !== 'summary') return;
    expect(decision.boundary).toEqual({ candidateEnd: decision.plan.cut, sourceLength: decision.plan.cut });
    expect(decision.counts).toEqual({ old: decision.plan.cut - 1, kept: messages.length - decision.plan.cut });
  });

  it('refuses a history whose last turn alone exceeds the budget', () => {
    const decision = decide(candidate, { perMessage: messages.map((_, index) => (index === messages.length - 1 ? 9000 : 10)), fixed: 0, ratio: 1 }, budget, idle, settings);
    expect(decision.kind).toBe('too-large');
  });
});
