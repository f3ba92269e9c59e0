import { describe, expect, it } from 'vitest';
import { budgetOf } from '../../src/compaction/policy/budget.js';
import { type CandidateSizes, decide, decideAhead, decisionSettingsOf } from '../../src/compaction/policy/decide.js';
import type { Epoch } from '../../src/compaction/types.js';
import { candidateOf, chooseCut } from '../../src/compaction/policy/plan.js';
import { sizesOf, totalSize } from '../../src/compaction/policy/sizing.js';
import { compressForBudget, compressSettingsOf, planCompress } from '../../src/compaction/policy/compress-tier.js';
import { estimateMessageTokens } from '../../src/transcript/tokens.js';
import type { ChatMessage } from '../../src/transcript/message.js';
import { configWith } from '../support/compaction.js';
import { reReadConversation, reReadTurn } from '../support/re-reads.js';

/** Issue 25, items 1 and 2: the compression tier in the decision, before the summary. */

const budget = budgetOf(8192, undefined, 1024, 1024); // 7168 tokens: soft zone from 4300, threshold 6093
const idle = { pending: null, running: false, attempt: 0 };
const sizes = (messages: readonly ChatMessage[]): CandidateSizes => ({ ...sizesOf(messages, 0, 1), ratio: 1 });

/** The shortest re-read history whose size is at least `tokens`. */
function historyOf(tokens: number): ChatMessage[] {
  for (let turns = 2; ; turns++) {
    const messages = reReadConversation(turns);
    if (totalSize(sizes(messages)) >= tokens) return messages;
  }
}

/**
 * A re-read history of 13 turns with a long user message in each (about 300
 * tokens of the user's own words: nothing a compression frees), 15.7k tokens:
 * compressed, it is still over the threshold. Turn 12 lists issues (1.9k
 * tokens, more than `keep_recent` alone), so raw only the new user message
 * would be kept; compressed (its test run and its listing trimmed by their
 * structure), turn 12 fits and stays.
 */
function bulkyReReads(): ChatMessage[] {
  return reReadConversation(13).map((message) => (message.role === 'user' ? { ...message, content: `${String(message.content)} ${'Keep the receipts exact to the cent. '.repeat(32)}` } : message));
}

describe('the compression tier', () => {
  const settings = decisionSettingsOf(configWith().compaction);

  it('compresses a crossed re-read history instead of summarizing it, when that alone brings it under the threshold', () => {
    const messages = historyOf(6093);
    const candidate = candidateOf(messages, null);
    const decision = decide(candidate, sizes(messages), budget, idle, settings);
    expect(decision.kind).toBe('compress');
    if (decision.kind !== 'compress') return;
    expect(decision.plan.size).toBeLessThan(0.85 * budget.tokens!);
    expect(decision.plan.results).toBeGreaterThan(0);
    expect(totalSize(sizes(messages)) - decision.plan.size).toBeGreaterThanOrEqual(1024);
    // The protected tail (what a summary would keep raw) is never touched; the epoch ends at the cut.
    for (let index = decision.plan.cut; index < messages.length; index++) expect(decision.plan.messages[index]).toBe(messages[index]);
    expect(decision.boundary).toEqual({ candidateEnd: decision.plan.cut, sourceLength: decision.plan.cut });
  });

  it('compresses in the soft zone rather than prepare a summary, unless a summary is already pending or running', () => {
    const messages = historyOf(4300);
    const candidate = candidateOf(messages, null);
    expect(decide(candidate, sizes(messages), budget, idle, settings).kind).toBe('compress');
    const pending: Epoch = { key: 'k', sourceLength: 3, seenLength: 3, replacement: messages.slice(0, 3), notes: 'n', strategy: 'summary', report: '', pending: true };
    expect(decide(candidate, sizes(messages), budget, { ...idle, pending }, settings)).toMatchObject({ kind: 'forward', prepareNext: true });
    expect(decide(candidate, sizes(messages), budget, { ...idle, running: true }, settings)).toMatchObject({ kind: 'forward', prepareNext: true });
  });

  it('is applied only when it frees at least clear_at_least tokens, at most a sixth of the budget', () => {
    const messages = historyOf(6093);
    const candidate = candidateOf(messages, null);
    const decision = decide(candidate, sizes(messages), budget, idle, settings);
    if (decision.kind !== 'compress') throw new Error(decision.kind);
    const sizeOf = (message: ChatMessage): number => estimateMessageTokens(message);
    const tier = compressSettingsOf(configWith().compaction.compress)!;
    const withAtLeast = (clearAtLeast: number) => ({ ...settings, compress: { ...tier, clearAtLeast } });
    const { freed } = decision.plan;
    expect(planCompress(candidate, sizes(messages), decision.plan.cut, withAtLeast(Math.ceil(freed) + 1), sizeOf)).toBeNull();
    expect(planCompress(candidate, sizes(messages), decision.plan.cut, withAtLeast(Math.floor(freed)), sizeOf)).not.toBeNull();
    // The default, 2048 tokens, is two thirds of a 4k window's budget: a sixth of it is asked instead (1194 on 8k).
    expect(tier.clearAtLeast).toBe(2048);
    expect(compressForBudget(tier, 3072)?.clearAtLeast).toBe(512);
    expect(compressForBudget(tier, 7168)?.clearAtLeast).toBe(1194);
    expect(compressForBudget(tier, 24_576)?.clearAtLeast).toBe(2048);
  });

  it('is off with compress.enabled false: the summary tier as before', () => {
    const off = decisionSettingsOf(configWith({ compaction: { compress: { enabled: false } } }).compaction);
    const messages = historyOf(6093);
    expect(decide(candidateOf(messages, null), sizes(messages), budget, idle, off).kind).toBe('summary');
  });

  it('a compressed history decides to forward: compressing it again frees nothing', () => {
    const messages = historyOf(6093);
    const candidate = candidateOf(messages, null);
    const decision = decide(candidate, sizes(messages), budget, idle, settings);
    if (decision.kind !== 'compress') throw new Error(decision.kind);
    const epoch: Epoch = { key: 'k', sourceLength: decision.boundary.sourceLength, seenLength: messages.length, replacement: decision.plan.messages.slice(0, decision.boundary.candidateEnd), notes: null, strategy: 'compress', report: '' };
    const next = candidateOf(messages, epoch);
    expect(decide(next, sizes(next.messages), budget, idle, settings).kind).toBe('forward');
  });

  it('when compression alone cannot get under the threshold, the summary keeps more turns, compressed: one epoch holds both', () => {
    // Long user messages in every turn (nothing to compress there) keep the history over the threshold once compressed.
    const messages = bulkyReReads();
    const candidate = candidateOf(messages, null);
    const decision = decide(candidate, sizes(messages), budget, idle, settings);
    if (decision.kind !== 'summary') throw new Error(decision.kind);
    const { plan } = decision;
    const kept = plan.prunedKept!;
    expect(kept.compressed).toMatchObject({ results: expect.any(Number) });
    expect(kept.compressed!.results).toBeGreaterThan(0);
    expect(kept.compressed!.after).toBeLessThan(kept.compressed!.before);
    // The summary's cut lies before the protected tail (the cut over the raw sizes): between the two the kept results
    // carry markers. In the protected tail only a result whose newer copy is kept too may become a marker; the
    // current turn is never touched.
    const protectedTail = chooseCut(candidate, sizes(messages), budget.tokens, settings)!;
    expect(plan.cut).toBeLessThan(protectedTail);
    for (let index = protectedTail; index < messages.length; index++) {
      if (kept.messages[index] !== messages[index]) expect(kept.messages[index]!.content).toMatch(/^\[compressed: (superseded by|identical to the result of) call /);
    }
    const markers = kept.messages.slice(plan.cut).filter((message) => message.role === 'tool' && String(message.content).includes('[compressed: '));
    expect(markers.length).toBe(kept.compressed!.results);
    // Without the tier the same history summarizes more and keeps nothing compressed.
    const off = decisionSettingsOf(configWith({ compaction: { compress: { enabled: false } } }).compaction);
    const plain = decide(candidate, sizes(messages), budget, idle, off);
    if (plain.kind !== 'summary') throw new Error(plain.kind);
    expect(plain.plan.cut).toBeGreaterThan(plan.cut);
    expect(plain.plan.prunedKept?.compressed).toBeUndefined();
  });

  it('compresses an agent loop under one user message too: the last steps the steps tier keeps are its protected tail', () => {
    // The re-read loop's calls, all under the task's one user message (as opencode and qwen-code send a task).
    const loop = (steps: number): ChatMessage[] => [
      { role: 'system', content: 'You are a careful coding agent.' },
      { role: 'user', content: 'Fix the cart.' },
      ...Array.from({ length: steps }, (_, index) => reReadTurn(index + 1).filter((message) => message.role !== 'user')).flat(),
    ];
    let messages = loop(2);
    for (let steps = 2; totalSize(sizes(messages)) < 6093; steps++) messages = loop(steps);
    const candidate = candidateOf(messages, null);
    const decision = decide(candidate, sizes(messages), budget, idle, settings);
    if (decision.kind !== 'compress') throw new Error(decision.kind);
    expect(decision.plan.size).toBeLessThan(0.85 * budget.tokens!);
    // The protected tail starts at a step (an assistant message) and is untouched.
    expect(messages[decision.plan.cut]!.role).toBe('assistant');
    for (let index = decision.plan.cut; index < messages.length; index++) expect(decision.plan.messages[index]).toBe(messages[index]);
    expect(decision.plan.messages[1]).toBe(messages[1]);
  });

  it('the background never prepares a compression: it is decided when a request needs it', () => {
    const messages = historyOf(4300);
    const ahead = decideAhead(candidateOf(messages, null), sizes(messages), budget, settings);
    expect(ahead === null || ahead.kind === 'summary' || ahead.kind === 'steps').toBe(true);
  });
});
