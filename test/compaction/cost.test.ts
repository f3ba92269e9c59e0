import { describe, expect, it } from 'vitest';
import { budgetOf } from '../../src/compaction/policy/budget.js';
import { type CandidateSizes, decide, decisionSettingsOf } from '../../src/compaction/policy/decide.js';
import { candidateOf } from '../../src/compaction/policy/plan.js';
import { sizesOf, totalSize } from '../../src/compaction/policy/sizing.js';
import { compressNow, crossingCompression } from '../../src/compaction/policy/compress-ahead.js';
import { compressForBudget } from '../../src/compaction/policy/compress-tier.js';
import { MIN_FREED_SHARE, compressionCost, compressionIsCheaper, crossingCost, firstChange, lastStepTokens, perTokenFreed, summaryCost } from '../../src/compaction/policy/cost.js';
import type { ChatMessage } from '../../src/transcript/message.js';
import { configWith } from '../support/compaction.js';
import { reReadConversation } from '../support/re-reads.js';

/**
 * Issue 36 item 4: the soft zone decided by the server seconds each way
 * costs, at the learned speeds (a 7B model on one GPU: prefill 5,000 t/s,
 * decode 130 t/s); with no speeds learned, today's rules by tokens stand.
 */

const speeds = { prefill: 5000, decode: 130, summaryTokens: 400 };
const budget = budgetOf(32_768, undefined, 1024, 1024);
const idle = { pending: null, running: false, attempt: 0 };
const sizes = (messages: readonly ChatMessage[]): CandidateSizes => ({ ...sizesOf(messages, 0, 1), ratio: 1 });
const settings = decisionSettingsOf(configWith().compaction);

/** The shortest re-read history past `tokens`. */
function historyOf(tokens: number): ChatMessage[] {
  for (let turns = 2; ; turns++) {
    const messages = reReadConversation(turns);
    if (totalSize(sizes(messages)) >= tokens) return messages;
  }
}

describe('decisions by cost (issue 36)', () => {
  it('prices a compression by what the server reads again after its first change', () => {
    const messages = historyOf(0.6 * budget.tokens!);
    const candidate = candidateOf(messages, null);
    const compressed = compressNow(candidate, sizes(messages), budget.tokens, { ...settings, compress: compressForBudget(settings.compress, budget.tokens) }, { atLeast: 0 })!;
    expect(compressed).not.toBeNull();
    const from = firstChange(messages, compressed.plan.messages);
    expect(from).toBeGreaterThan(0);
    const after = sizes(messages).perMessage.slice(from).reduce((sum, size) => sum + size, 0) - compressed.plan.freed;
    expect(compressionCost(candidate, sizes(messages), compressed.plan, speeds)).toEqual({ seconds: after / 5000, freed: compressed.plan.freed });
  });

  it('prices a summary by its notes, its instruction and what is read again after it', () => {
    const messages = historyOf(10_000);
    const candidate = candidateOf(messages, null);
    const head = sizes(messages).perMessage[0]!;
    const cost = summaryCost(candidate, sizes(messages), 6000, 26_000, 1024, speeds);
    expect(cost.freed).toBe(20_000);
    expect(cost.seconds).toBeCloseTo(400 / 130 + 256 / 5000 + (6000 - head) / 5000, 9);
    // Before a summary was seen, it is priced at its most.
    expect(summaryCost(candidate, sizes(messages), 6000, 26_000, 1024, { ...speeds, summaryTokens: null }).seconds).toBeCloseTo(1024 / 130 + 256 / 5000 + (6000 - head) / 5000, 9);
  });

  it('compares by seconds per token freed, and never takes a compression that frees only a few results', () => {
    expect(perTokenFreed({ seconds: 1, freed: 0 })).toBe(Number.POSITIVE_INFINITY);
    expect(compressionIsCheaper({ seconds: 1, freed: 2000 }, { seconds: 2, freed: 3000 }, 10_000)).toBe(true);
    expect(compressionIsCheaper({ seconds: 1, freed: 2000 }, { seconds: 1, freed: 3000 }, 10_000)).toBe(false);
    expect(compressionIsCheaper({ seconds: 0, freed: MIN_FREED_SHARE * 10_000 - 1 }, null, 10_000)).toBe(false);
    expect(compressionIsCheaper({ seconds: 9, freed: MIN_FREED_SHARE * 10_000 }, null, 10_000)).toBe(true);
  });

  it('never takes a compression that frees less than one step adds: on a 4k window the next request undoes it (bench/compress.ts, 4k)', () => {
    // The step the client just added: the assistant's call and its result.
    const messages = reReadConversation(3);
    const toolEnd = messages.map((message) => message.role).lastIndexOf('tool') + 1;
    const history = messages.slice(0, toolEnd);
    const stepSizes = sizes(history);
    const step = lastStepTokens(candidateOf(history, null), stepSizes);
    expect(step).toBe(stepSizes.perMessage.at(-2)! + stepSizes.perMessage.at(-1)!);
    expect(step).toBeGreaterThan(MIN_FREED_SHARE * 3072);
    // Cheaper per token freed than the summary, and past the budget's share, yet less than the step: not taken.
    const small = { seconds: 0.01, freed: step - 1 };
    expect(compressionIsCheaper(small, { seconds: 10, freed: 2000 }, 3072)).toBe(true);
    expect(compressionIsCheaper(small, { seconds: 10, freed: 2000 }, 3072, step)).toBe(false);
    expect(compressionIsCheaper({ seconds: 0.01, freed: step }, { seconds: 10, freed: 2000 }, 3072, step)).toBe(true);
  });

  it('leaves the soft zone’s compression to the crossing when that frees more for the same re-reading (today: compressed at once)', () => {
    const messages = historyOf(0.62 * budget.tokens!);
    const candidate = candidateOf(messages, null);
    // Today's rule by tokens compresses now: it frees clear_at_least.
    expect(decide(candidate, sizes(messages), budget, idle, settings).kind).toBe('compress');
    const tier = { ...settings, compress: compressForBudget(settings.compress, budget.tokens) };
    const crossing = crossingCompression(candidate, sizes(messages), budget.tokens!, tier)!;
    expect(crossing).not.toBeNull();
    const now = compressNow(candidate, sizes(messages), budget.tokens, tier, { atLeast: 0 })!;
    const later = crossingCost(sizes(messages), crossing, settings.threshold * budget.tokens!, speeds);
    expect(perTokenFreed(later)).toBeLessThan(perTokenFreed(compressionCost(candidate, sizes(messages), now.plan, speeds)));
    // By cost it waits for the crossing, preparing no summary (the crossing's compression will do).
    expect(decide(candidate, sizes(messages), budget, idle, { ...settings, cost: speeds })).toEqual({ kind: 'forward', size: totalSize(sizes(messages)), prepareNext: false });
    // No speeds learned: today's rule.
    expect(decide(candidate, sizes(messages), budget, idle, { ...settings, cost: null }).kind).toBe('compress');
  });

  it('keeps the crossing itself as it was: a candidate over the threshold compacts by the tiers', () => {
    const messages = historyOf(0.86 * budget.tokens!);
    const candidate = candidateOf(messages, null);
    const byTokens = decide(candidate, sizes(messages), budget, idle, settings);
    expect(decide(candidate, sizes(messages), budget, idle, { ...settings, cost: speeds })).toEqual(byTokens);
  });
});
