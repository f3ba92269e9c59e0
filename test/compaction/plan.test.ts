import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import type { ChatMessage } from '../../src/transcript/message.js';
import { estimateMessageTokens } from '../../src/transcript/tokens.js';
import { headLength, isRealUserMessage, taskAnchorIndex, turnRanges } from '../../src/transcript/groups.js';
import { findPairProblems } from '../../src/transcript/pairs.js';
import { isMarked, mark } from '../../src/transcript/marks.js';
import {
  candidateOf,
  chooseCut,
  epochBoundary,
  summaryPairTokens,
  triggerOf,
  type Candidate,
  type CompactionSettings,
} from '../../src/compaction/policy/plan.js';
import { type Sizes, totalSize } from '../../src/compaction/policy/sizing.js';
import type { Epoch } from '../../src/compaction/types.js';
import { planTiers } from '../../src/compaction/policy/tiers/list.js';
import { pruneTier } from '../../src/compaction/policy/tiers/prune.js';
import { compressTier } from '../../src/compaction/policy/tiers/compress.js';
import { summaryTier } from '../../src/compaction/policy/tiers/summary.js';
import { call, propertyParameters, validTranscriptArbitrary } from '../transcript/arbitraries.js';

/** The tiers that cut at a turn boundary, walked as the engine walks its list (the steps tier is decide.test.ts's). */
const TURN_TIERS = [pruneTier, compressTier, summaryTier] as const;

function planCompaction(candidate: Candidate, sizes: Sizes, budget: number | null, trigger: 'size' | 'count', settings: CompactionSettings, sizeOf: (message: ChatMessage) => number) {
  return planTiers(TURN_TIERS, candidate, sizes, budget, trigger, settings, sizeOf);
}

const settings: CompactionSettings = {
  threshold: 0.85,
  target: 0.5,
  keepRecent: 0.25,
  maxMessages: 0,
  summaryMaxTokens: 100,
  pruneMaxResultChars: 200,
};

const system: ChatMessage = { role: 'system', content: 'You are a careful agent.' };
const user = (content: string): ChatMessage => ({ role: 'user', content });
const assistant = (content: string): ChatMessage => ({ role: 'assistant', content });
const calling = (id: string): ChatMessage => ({ role: 'assistant', content: null, tool_calls: [call(id)] });
const result = (id: string, content = `result of ${id}`): ChatMessage => ({ role: 'tool', tool_call_id: id, content });
const summaryPair = (notes: string): ChatMessage[] => [
  { role: 'user', content: mark('summary', notes) },
  { role: 'assistant', content: mark('summary', 'Understood; continuing from these notes.') },
];

/** A turn of a user message, one call with its result, and an answer: 4 messages. */
function turn(number: number, resultText = `listing ${number}`): ChatMessage[] {
  return [user(`Turn ${number}`), calling(`c${number}`), result(`c${number}`, resultText), assistant(`Done ${number}`)];
}

function conversationOf(turns: number, resultText?: (turn: number) => string): ChatMessage[] {
  const messages = [system];
  for (let number = 1; number <= turns; number++) messages.push(...turn(number, resultText?.(number)));
  return messages;
}

const candidate = (messages: readonly ChatMessage[]): Candidate => candidateOf(messages, null);
const estimatedSizes = (messages: readonly ChatMessage[], fixed = 0): Sizes => ({ perMessage: messages.map(estimateMessageTokens), fixed });
/** Every message costs `each` tokens: sizes easy to reason about. */
const flatSizes = (messages: readonly ChatMessage[], each: number): Sizes => ({ perMessage: messages.map(() => each), fixed: 0 });

describe('candidateOf', () => {
  it('is the original history without an epoch', () => {
    const messages = conversationOf(2);
    expect(candidateOf(messages, null)).toEqual({ messages, replacementLength: 0, sourceStart: 0, epoch: null });
    expect(candidateOf(messages, null).messages).toBe(messages);
  });

  it("is the epoch's replacement followed by what it does not cover", () => {
    const messages = conversationOf(3);
    const replacement = [system, ...summaryPair('notes')];
    const epoch: Epoch = { key: 'k', sourceLength: 5, seenLength: 5, replacement, notes: 'notes', strategy: 'summary', report: '' };
    const built = candidateOf(messages, epoch);
    expect(built.messages).toEqual([...replacement, ...messages.slice(5)]);
    expect(built.replacementLength).toBe(3);
    expect(built.sourceStart).toBe(5);
    expect(built.epoch).toBe(epoch);
  });
});

describe('totalSize and triggerOf', () => {
  it('adds the fixed part only to a range that starts at 0', () => {
    const sizes: Sizes = { perMessage: [1, 2, 3, 4], fixed: 10 };
    expect(totalSize(sizes)).toBe(20);
    expect(totalSize(sizes, 0, 2)).toBe(13);
    expect(totalSize(sizes, 1, 3)).toBe(5);
    expect(totalSize(sizes, 4)).toBe(0);
  });

  it('fires on size at the threshold, on count at max_messages, and not without either', () => {
    const at = { threshold: 0.5, maxMessages: 10 };
    expect(triggerOf(50, 1, 100, at)).toBe('size');
    expect(triggerOf(49, 1, 100, at)).toBeNull();
    expect(triggerOf(49, 10, 100, at)).toBe('count');
    expect(triggerOf(49, 10, 100, { threshold: 0.5, maxMessages: 0 })).toBeNull();
    expect(triggerOf(1e9, 1, null, at)).toBeNull();
    expect(triggerOf(1e9, 10, null, at)).toBe('count');
  });
});

describe('chooseCut', () => {
  it('keeps the recent turns that fit keepRecent × budget', () => {
    const messages = conversationOf(5); // turns start at 1, 5, 9, 13, 17; 21 messages
    const sizes = flatSizes(messages, 10); // a turn costs 40
    // keepRecent 0.25 × 400 = 100: two turns (80) fit, three (120) do not.
    expect(chooseCut(candidate(messages), sizes, 400, settings)).toBe(13);
    // × 480 = 120: three turns fit exactly.
    expect(chooseCut(candidate(messages), sizes, 480, settings)).toBe(9);
  });

  it('keeps at least the last turn, even when it alone exceeds keepRecent × budget', () => {
    const messages = conversationOf(5);
    expect(chooseCut(candidate(messages), flatSizes(messages, 10), 40, settings)).toBe(17);
    expect(chooseCut(candidate(messages), flatSizes(messages, 1000), 100, settings)).toBe(17);
  });

  it('never cuts at the first turn: something must be old', () => {
    const messages = conversationOf(3);
    expect(chooseCut(candidate(messages), flatSizes(messages, 1), 1_000_000, settings)).toBe(5);
  });

  it('is null when only one turn follows the head', () => {
    const messages = conversationOf(1);
    expect(chooseCut(candidate(messages), flatSizes(messages, 1), 100, settings)).toBeNull();
    expect(chooseCut(candidate([system]), flatSizes([system], 1), 100, settings)).toBeNull();
  });

  it('keeps at most maxMessages / 2 messages after the cut, whatever fired, but still the last turn', () => {
    const messages = conversationOf(5); // 21 messages
    const sizes = flatSizes(messages, 1);
    // Without a count limit the whole recent part fits: the cut is the second turn.
    expect(chooseCut(candidate(messages), sizes, 10_000, settings)).toBe(5);
    // 20 / 2 = 10: at most 10 messages kept, so the cut is 13 (8 kept), not 9 (12 kept).
    expect(chooseCut(candidate(messages), sizes, 10_000, { ...settings, maxMessages: 20 })).toBe(13);
    expect(chooseCut(candidate(messages), sizes, 10_000, { ...settings, maxMessages: 20 })).toBe(13);
    expect(chooseCut(candidate(messages), sizes, 1_000_000, { ...settings, maxMessages: 20 })).toBe(13);
    // 4 / 2 = 2 messages: fewer than a turn, yet the last turn stays.
    expect(chooseCut(candidate(messages), sizes, 10_000, { ...settings, maxMessages: 4 })).toBe(17);
  });

  it('without a budget (unknown window) keeps as many turns as maxMessages / 2 allows, at least the last', () => {
    const messages = conversationOf(4); // 17 messages; turns start at 1, 5, 9 and 13
    expect(chooseCut(candidate(messages), flatSizes(messages, 1), null, { ...settings, maxMessages: 100 })).toBe(5);
    expect(chooseCut(candidate(messages), flatSizes(messages, 1), null, { ...settings, maxMessages: 16 })).toBe(9);
    expect(chooseCut(candidate(messages), flatSizes(messages, 1), null, { ...settings, maxMessages: 8 })).toBe(13);
    expect(chooseCut(candidate(messages), flatSizes(messages, 1), null, { ...settings, maxMessages: 2 })).toBe(13);
  });

  it('cuts only at a real user message: a summary pair or a notice is no turn boundary', () => {
    const messages = [system, ...summaryPair('notes'), ...turn(1), user(mark('truncated', 'omitted')), assistant('ok'), ...turn(2)];
    const cut = chooseCut(candidate(messages), flatSizes(messages, 10), 10, settings);
    expect(cut).toBe(9);
    expect(isRealUserMessage(messages[cut!]!)).toBe(true);
  });
});

describe('planCompaction', () => {
  const sizeOf = estimateMessageTokens;

  it('prunes when pruning the old tool results reaches the target', () => {
    const big = 'x'.repeat(4000); // ~1000 tokens each, pruned to 200 characters
    const messages = conversationOf(4, (number) => (number < 4 ? big : 'small'));
    const sizes = estimatedSizes(messages);
    const budget = 3500; // total ≈ 3.1k: over the threshold (2975)
    expect(triggerOf(totalSize(sizes), messages.length, budget, settings)).toBe('size');
    const plan = planCompaction(candidate(messages), sizes, budget, 'size', settings, sizeOf);
    expect(plan.tier).toBe('prune');
    if (plan.tier !== 'prune') return;
    expect(plan.cut).toBe(13);
    expect(plan.pruned).toBe(3);
    expect(plan.size).toBeLessThanOrEqual(settings.target * budget);
    expect(plan.size).toBe(plan.messages.reduce((total, message) => total + sizeOf(message), 0));
    expect(plan.messages).toHaveLength(messages.length);
    // Only the old results changed; everything else is the same object.
    plan.messages.forEach((message, index) => {
      if ([3, 7, 11].includes(index)) {
        expect(message).not.toBe(messages[index]);
        expect(String(message.content).length).toBeLessThanOrEqual(settings.pruneMaxResultChars);
      } else {
        expect(message).toBe(messages[index]);
      }
    });
    expect(messages[3]!.content).toBe(big);
  });

  it('does not prune results of the kept turns', () => {
    const big = 'x'.repeat(4000);
    const messages = conversationOf(3, () => big);
    const plan = planCompaction(candidate(messages), estimatedSizes(messages), 6000, 'size', settings, sizeOf);
    // The last turn's result stays whole; the two old ones are pruned, and that reaches 3000.
    expect(plan.tier).toBe('prune');
    if (plan.tier !== 'prune') return;
    expect(plan.messages[11]).toBe(messages[11]);
    expect(plan.pruned).toBe(2);
  });

  it('summarizes when pruning cannot reach the target', () => {
    const text = 'y'.repeat(150); // under the prune limit: nothing to prune
    const messages = conversationOf(10, () => text);
    const sizes = estimatedSizes(messages);
    const budget = Math.ceil(totalSize(sizes) / 0.9);
    const plan = planCompaction(candidate(messages), sizes, budget, 'size', settings, sizeOf);
    expect(plan.tier).toBe('summary');
    if (plan.tier !== 'summary') return;
    expect(plan.size).toBe(totalSize(sizes, 0, 1) + summaryPairTokens(settings.summaryMaxTokens) + totalSize(sizes, plan.cut));
    expect(isRealUserMessage(messages[plan.cut]!)).toBe(true);
  });

  it('summarizes rather than prunes when the count fired', () => {
    const big = 'x'.repeat(4000);
    const messages = conversationOf(4, () => big);
    const plan = planCompaction(candidate(messages), estimatedSizes(messages), 100_000, 'count', { ...settings, maxMessages: 16 }, sizeOf);
    expect(plan.tier).toBe('summary');
  });

  it('summarizes when pruning helps but not enough', () => {
    const text = 'x'.repeat(300); // 79 tokens, pruned to 54: a saving too small for the target
    const messages = conversationOf(10, () => text);
    const sizes = estimatedSizes(messages);
    const budget = Math.ceil(totalSize(sizes) / 0.9);
    const plan = planCompaction(candidate(messages), sizes, budget, 'size', settings, sizeOf);
    expect(plan.tier).toBe('summary');
    // With a looser target the same pruning would have been enough.
    expect(planCompaction(candidate(messages), sizes, budget, 'size', { ...settings, target: 0.8 }, sizeOf).tier).toBe('prune');
  });

  it('is too-large when the last turn alone exceeds the budget, naming what the kept part needs', () => {
    const messages = [...conversationOf(3), user('z'.repeat(20_000))];
    const sizes = estimatedSizes(messages);
    const plan = planCompaction(candidate(messages), sizes, 1000, 'size', settings, sizeOf);
    expect(plan).toEqual({ tier: 'too-large', needed: totalSize(sizes, 0, 1) + totalSize(sizes, 13) });
  });

  it('is too-large with one turn over the budget, nothing with one turn under it', () => {
    const messages = [system, user('z'.repeat(20_000))];
    const sizes = estimatedSizes(messages);
    expect(planCompaction(candidate(messages), sizes, 1000, 'size', settings, sizeOf)).toEqual({ tier: 'too-large', needed: totalSize(sizes) });
    expect(planCompaction(candidate(messages), sizes, 100_000, 'count', settings, sizeOf)).toEqual({ tier: 'nothing', reason: 'one-turn' });
  });

  it('is nothing when only one turn follows the head', () => {
    const messages = conversationOf(1);
    expect(planCompaction(candidate(messages), estimatedSizes(messages), 10_000, 'count', { ...settings, maxMessages: 2 }, sizeOf)).toEqual({
      tier: 'nothing',
      reason: 'one-turn',
    });
  });

  it('is nothing when the old part is only an earlier summary', () => {
    const messages = [system, ...summaryPair('notes'), ...turn(1)];
    // The pair is the epoch's: its marks are where the replacement put them.
    const summarized = candidateOf([system, ...turn(1)], {
      key: 'k', sourceLength: 1, seenLength: 1, replacement: messages.slice(0, 3), marked: [1, 2], notes: 'notes', strategy: 'summary', report: '',
    });
    const sizes = estimatedSizes(messages);
    expect(planCompaction(summarized, sizes, 10_000, 'count', { ...settings, maxMessages: 2 }, sizeOf)).toEqual({
      tier: 'nothing',
      reason: 'only-summary',
    });
    // …and too-large when what is kept cannot fit anyway.
    const kept = totalSize(sizes, 0, 1) + totalSize(sizes, 3);
    expect(planCompaction(summarized, sizes, kept - 1, 'size', settings, sizeOf)).toEqual({ tier: 'too-large', needed: kept });
  });

  it('summarizes an earlier summary together with new old turns (a merge)', () => {
    const messages = [system, ...summaryPair('notes'), ...turn(1), ...turn(2)];
    // Old messages worth more than a summary pair (6 × 40 tokens against 100 + 64), so summarizing gains.
    const plan = planCompaction(candidate(messages), flatSizes(messages, 40), 600, 'size', settings, sizeOf);
    expect(plan).toMatchObject({ tier: 'summary', cut: 7 });
  });

  it('is nothing when the old part is no larger than a summary pair may be and the history fits as it is', () => {
    const messages = [system, ...turn(1), ...turn(2)];
    // 4 old messages of 10 tokens against a pair of up to 164: a summary could only add tokens.
    expect(planCompaction(candidate(messages), flatSizes(messages, 10), 250, 'size', settings, sizeOf)).toEqual({ tier: 'nothing', reason: 'no-gain' });
    // Over the budget, it is still tried: short notes may be all that makes it fit.
    expect(planCompaction(candidate(messages), flatSizes(messages, 10), 85, 'size', settings, sizeOf)).toMatchObject({ tier: 'too-large' });
    // A count trigger trades tokens for messages: it summarizes all the same, when that removes messages…
    expect(planCompaction(candidate(messages), flatSizes(messages, 10), 250, 'count', settings, sizeOf)).toMatchObject({ tier: 'summary', cut: 5 });
    // …and not when the old part is no more than the two messages of the pair.
    const short = [system, user('Turn 1'), assistant('Done 1'), ...turn(2)];
    expect(planCompaction(candidate(short), flatSizes(short, 10), 250, 'count', settings, sizeOf)).toEqual({ tier: 'nothing', reason: 'no-gain' });
  });
});

describe('epochBoundary', () => {
  const epoch = (replacement: ChatMessage[], sourceLength: number): Epoch => ({
    key: 'k',
    sourceLength,
    seenLength: sourceLength,
    replacement,
    notes: 'notes',
    strategy: 'summary',
    report: '',
  });
  const original = conversationOf(6); // 25 messages
  // Replacement: head + summary pair + turn 3 kept raw, standing for original[0, 13).
  const withEpoch = candidateOf(original, epoch([system, ...summaryPair('notes'), ...turn(3)], 13));

  it('without an epoch, the candidate and the original coincide', () => {
    expect(epochBoundary(candidate(original), 9)).toEqual({ candidateEnd: 9, sourceLength: 9 });
  });

  it('a cut after the replacement: the epoch covers the candidate up to the cut', () => {
    // Candidate index 11 is original index 13 + (11 - 7) = 17.
    expect(withEpoch.replacementLength).toBe(7);
    expect(epochBoundary(withEpoch, 11)).toEqual({ candidateEnd: 11, sourceLength: 17 });
    expect(withEpoch.messages[11]).toBe(original[17]);
    expect(epochBoundary(withEpoch, 7)).toEqual({ candidateEnd: 7, sourceLength: 13 });
  });

  it('a cut inside the replacement: the epoch covers the whole replacement', () => {
    expect(epochBoundary(withEpoch, 3)).toEqual({ candidateEnd: 7, sourceLength: 13 });
  });
});

/** Settings and a budget drawn around the size of the transcript they are used with. */
const planInputArbitrary = validTranscriptArbitrary.chain((messages) => {
  const total = messages.reduce((sum, message) => sum + estimateMessageTokens(message), 0);
  return fc.record({
    messages: fc.constant(messages),
    budget: fc.option(fc.integer({ min: 1, max: Math.max(2, 2 * total) }), { nil: null, freq: 8 }),
    fixed: fc.integer({ min: 0, max: 20 }),
    trigger: fc.constantFrom('size' as const, 'count' as const),
    settings: fc.record({
      threshold: fc.double({ min: 0.3, max: 1, noNaN: true }),
      target: fc.double({ min: 0.1, max: 0.9, noNaN: true }),
      keepRecent: fc.double({ min: 0, max: 0.8, noNaN: true }),
      maxMessages: fc.oneof(fc.constant(0), fc.integer({ min: 2, max: 60 })),
      summaryMaxTokens: fc.integer({ min: 1, max: 60 }),
      pruneMaxResultChars: fc.integer({ min: 0, max: 60 }),
    }),
  });
});

describe('planCompaction properties', () => {
  it('property: a summary plan cuts after the head at a balanced turn boundary, and applying it keeps pairs, head, task and a smaller size', () => {
    let summaries = 0;
    fc.assert(
      fc.property(planInputArbitrary, ({ messages, budget, fixed, trigger, settings }) => {
        const copy = structuredClone(messages);
        const sizes = estimatedSizes(messages, fixed);
        const plan = planCompaction(candidate(messages), sizes, budget, trigger, settings, estimateMessageTokens);
        expect(messages).toEqual(copy);
        if (plan.tier !== 'summary') return;
        summaries++;
        const head = headLength(messages);
        const anchor = taskAnchorIndex(messages);
        expect(plan.cut).toBeGreaterThan(head);
        expect(plan.cut).toBeLessThanOrEqual(anchor);
        const turnStarts = turnRanges(messages).map((range) => range.start);
        if (plan.turnStart === undefined) {
          expect(turnStarts).toContain(plan.cut);
        } else {
          // Issue 13 item 10: the cut may go through the last complete turn, at a step boundary, its user message kept.
          expect(turnStarts).toContain(plan.turnStart);
          expect(plan.turnStart).toBeLessThan(plan.cut);
          expect(messages[plan.cut]!.role).toBe('assistant');
        }
        expect(messages[plan.cut]!.role).not.toBe('tool');
        if (budget !== null) expect(plan.size).toBeLessThanOrEqual(budget);

        // Applied as the engine applies it, with notes as long as the summary may be: summaryMaxTokens tokens of text.
        const applied = summaryTier.replacementOf(messages, plan, messages.length, 'n'.repeat(4 * settings.summaryMaxTokens), 'notes');
        const keptUserMessage = plan.turnStart === undefined ? 0 : 1;
        expect(findPairProblems(applied)).toEqual([]);
        applied.slice(0, head).forEach((message, index) => expect(message).toBe(messages[index]));
        expect(applied.at(-1 - (messages.length - 1 - anchor))).toBe(messages[anchor]);
        expect(taskAnchorIndex(applied)).toBe(head + 2 + keptUserMessage + (anchor - plan.cut));
        expect(isMarked(applied[head]!, 'summary')).toBe(true);

        const appliedSize = totalSize(estimatedSizes(applied, fixed));
        // The plan's size is what the applied history may cost at most.
        expect(appliedSize).toBeLessThanOrEqual(plan.size);
        // The messages only: a range from 0 would also count the fixed part (tools), which stays.
        const oldSize = sizes.perMessage.slice(head, plan.cut).reduce((sum, size) => sum + size, 0);
        if (oldSize > summaryPairTokens(settings.summaryMaxTokens)) expect(appliedSize).toBeLessThanOrEqual(totalSize(sizes));
      }),
      propertyParameters,
    );
    // The property is about summary plans: make sure it saw some.
    expect(summaries).toBeGreaterThan(0);
  });

  it('property: the cut chosen keeps the last turn, is a real user message, and honours maxMessages / 2 when it can', () => {
    fc.assert(
      fc.property(planInputArbitrary, ({ messages, budget, fixed, trigger, settings }) => {
        const sizes = estimatedSizes(messages, fixed);
        const cut = chooseCut(candidate(messages), sizes, budget, settings);
        const starts = turnRanges(messages).map((range) => range.start).filter((start) => start > headLength(messages));
        if (starts.length === 0) {
          expect(cut).toBeNull();
          return;
        }
        expect(cut).not.toBeNull();
        expect(starts).toContain(cut);
        expect(isRealUserMessage(messages[cut!]!)).toBe(true);
        expect(cut!).toBeLessThanOrEqual(taskAnchorIndex(messages));
        const keepsMoreThanLastTurn = cut! < starts.at(-1)!;
        if (keepsMoreThanLastTurn && budget !== null) {
          expect(totalSize(sizes, cut!)).toBeLessThanOrEqual(settings.keepRecent * budget);
        }
        if (keepsMoreThanLastTurn && settings.maxMessages > 0) {
          expect(messages.length - cut!).toBeLessThanOrEqual(Math.floor(settings.maxMessages / 2));
        }
        // Taking one more turn would break one of the limits (or cut at the first turn).
        if (cut! > starts[0]!) {
          const earlier = starts[starts.indexOf(cut!) - 1]!;
          // Without a budget only the last turn is kept.
          const fitsBudget = budget !== null && totalSize(sizes, earlier) <= settings.keepRecent * budget;
          const fitsCount = settings.maxMessages === 0 || messages.length - earlier <= Math.floor(settings.maxMessages / 2);
          expect(fitsBudget && fitsCount).toBe(false);
        }
      }),
      propertyParameters,
    );
  });
});
