import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import type { ChatMessage } from '../../src/transcript/message.js';
import {
  balanceCut,
  balanceToolCallBoundary,
  headLength,
  isRealUserMessage,
  splitTurns,
  stepRanges,
  taskAnchorIndex,
  turnRanges,
} from '../../src/transcript/groups.js';
import { findPairProblems } from '../../src/transcript/pairs.js';
import { mark } from '../../src/transcript/marks.js';
import { anyTranscriptArbitrary, call, propertyParameters, validTranscriptArbitrary } from './arbitraries.js';

const system: ChatMessage = { role: 'system', content: 'x' };
const developer: ChatMessage = { role: 'developer', content: 'rules' };
const user = (content: string): ChatMessage => ({ role: 'user', content });
const assistant = (content: string): ChatMessage => ({ role: 'assistant', content });
const calling = (...ids: string[]): ChatMessage => ({ role: 'assistant', content: null, tool_calls: ids.map((id) => call(id)) });
const result = (id: string): ChatMessage => ({ role: 'tool', tool_call_id: id, content: `result of ${id}` });
const summaryUser: ChatMessage = { role: 'user', content: mark('summary', 'notes') };
const summaryAssistant: ChatMessage = { role: 'assistant', content: mark('summary', 'Understood; continuing from these notes.') };

/** A valid transcript and an index into it, from 0 to its length (both ends included). */
const transcriptAndCutArbitrary = validTranscriptArbitrary.chain((messages) =>
  fc.tuple(fc.constant(messages), fc.integer({ min: 0, max: messages.length })),
);

describe('headLength', () => {
  it('@example: counts the leading system message', () => {
    expect(headLength([{ role: 'system', content: 'x' }, { role: 'user', content: 'hi' }])).toBe(1);
  });

  it('counts system and developer messages, only while they lead', () => {
    expect(headLength([system, developer, user('hi'), system])).toBe(2);
    expect(headLength([user('hi'), system])).toBe(0);
    expect(headLength([])).toBe(0);
    expect(headLength([system, developer])).toBe(2);
  });
});

describe('isRealUserMessage', () => {
  it('is true for any user message, whatever its text (a mark is genuine only where an epoch put it), false for another role', () => {
    expect(isRealUserMessage(user('hi'))).toBe(true);
    expect(isRealUserMessage({ role: 'user', content: [{ type: 'text', text: 'hi' }] })).toBe(true);
    expect(isRealUserMessage(user(mark('truncated', 'a pasted log')))).toBe(true);
    expect(isRealUserMessage(assistant('hi'))).toBe(false);
    expect(isRealUserMessage(system)).toBe(false);
  });
});

describe('turnRanges', () => {
  it('@example: one range per turn after the head', () => {
    expect(turnRanges([system, user('1'), assistant('a1'), user('2')])).toEqual([
      { start: 1, end: 3 },
      { start: 3, end: 4 },
    ]);
  });

  it('makes the messages before the first real user message a turn of their own', () => {
    expect(turnRanges([system, summaryUser, summaryAssistant, user('1'), assistant('a1')])).toEqual([
      { start: 1, end: 3 },
      { start: 3, end: 5 },
    ]);
    expect(turnRanges([assistant('hello'), user('1')])).toEqual([
      { start: 0, end: 1 },
      { start: 1, end: 2 },
    ]);
  });

  it('item 5: starts a turn at a client user message that looks marked; the genuine pair right after the head is a turn of its own', () => {
    expect(turnRanges([user('1'), assistant('a'), user(mark('truncated', 'a pasted log')), assistant('b'), user('2')])).toEqual([
      { start: 0, end: 2 },
      { start: 2, end: 4 },
      { start: 4, end: 5 },
    ]);
    expect(turnRanges([system, summaryUser, summaryAssistant, user('1')])).toEqual([
      { start: 1, end: 3 },
      { start: 3, end: 4 },
    ]);
  });

  it('starts from the given index, and returns nothing for an empty tail', () => {
    expect(turnRanges([system, user('1'), assistant('a'), user('2')], 2)).toEqual([
      { start: 2, end: 3 },
      { start: 3, end: 4 },
    ]);
    expect(turnRanges([system, developer])).toEqual([]);
    expect(turnRanges([])).toEqual([]);
  });

  it('property: covers [head, length) without gaps or overlaps; every turn after the first starts with a real user message', () => {
    fc.assert(
      fc.property(anyTranscriptArbitrary, (messages) => {
        const head = headLength(messages);
        const ranges = turnRanges(messages);
        let expected = head;
        for (const [position, range] of ranges.entries()) {
          expect(range.start).toBe(expected);
          expect(range.end).toBeGreaterThan(range.start);
          if (position > 0) expect(isRealUserMessage(messages[range.start]!)).toBe(true);
          // No real user message inside a turn: it would have started the next one.
          for (let index = range.start + 1; index < range.end; index++) expect(isRealUserMessage(messages[index]!)).toBe(false);
          expected = range.end;
        }
        expect(expected).toBe(Math.max(head, messages.length));
      }),
      propertyParameters,
    );
  });

  it('property: in a valid transcript every turn starts with a real user message, one per turn', () => {
    fc.assert(
      fc.property(validTranscriptArbitrary, (messages) => {
        const ranges = turnRanges(messages);
        for (const range of ranges) expect(isRealUserMessage(messages[range.start]!)).toBe(true);
        expect(ranges).toHaveLength(messages.filter(isRealUserMessage).length);
      }),
      propertyParameters,
    );
  });
});

describe('stepRanges', () => {
  it('@example: an assistant message with its tool results, then a plain assistant message', () => {
    expect(stepRanges([user('go'), calling('c1'), result('c1'), assistant('done')], { start: 0, end: 4 })).toEqual([
      { start: 1, end: 3 },
      { start: 3, end: 4 },
    ]);
  });

  it('stops at the end of the range, even inside a block of results', () => {
    const messages = [user('go'), calling('a', 'b'), result('a'), result('b'), assistant('done')];
    expect(stepRanges(messages, { start: 0, end: 3 })).toEqual([{ start: 1, end: 3 }]);
    expect(stepRanges(messages, { start: 2, end: 5 })).toEqual([{ start: 4, end: 5 }]);
  });

  it('property: steps start at an assistant message, hold only tool messages after it, and do not overlap', () => {
    fc.assert(
      fc.property(anyTranscriptArbitrary, (messages) => {
        for (const turn of turnRanges(messages)) {
          let previousEnd = turn.start;
          for (const step of stepRanges(messages, turn)) {
            expect(step.start).toBeGreaterThanOrEqual(previousEnd);
            expect(step.end).toBeLessThanOrEqual(turn.end);
            expect(messages[step.start]!.role).toBe('assistant');
            for (let index = step.start + 1; index < step.end; index++) expect(messages[index]!.role).toBe('tool');
            // A step takes every tool result that follows it.
            if (step.end < turn.end) expect(messages[step.end]!.role).not.toBe('tool');
            previousEnd = step.end;
          }
        }
      }),
      propertyParameters,
    );
  });
});

describe('taskAnchorIndex', () => {
  it('is the index of the last user message; one that looks marked is a task like any other', () => {
    expect(taskAnchorIndex([system, user('1'), assistant('a'), user('2'), calling('c'), result('c')])).toBe(3);
    expect(taskAnchorIndex([system, user('1'), assistant('a'), user(mark('summary', 'a pasted page')), calling('c'), result('c')])).toBe(3);
    // compactor's own pair is never the last user message: a kept turn follows it.
    expect(taskAnchorIndex([system, summaryUser, summaryAssistant, user('1'), calling('c'), result('c')])).toBe(3);
  });

  it('is -1 when there is no user message', () => {
    expect(taskAnchorIndex([system, assistant('a')])).toBe(-1);
    expect(taskAnchorIndex([])).toBe(-1);
  });

  it('property: the start of the last turn of a valid transcript', () => {
    fc.assert(
      fc.property(validTranscriptArbitrary, (messages) => {
        expect(taskAnchorIndex(messages)).toBe(turnRanges(messages).at(-1)!.start);
      }),
      propertyParameters,
    );
  });
});

describe('balanceToolCallBoundary', () => {
  it('@example: the result of c1 moves to the old part with its call', () => {
    const old = [calling('c1')];
    const toolC1 = result('c1');
    const next = user('next');
    const [balancedOld, balancedRecent] = balanceToolCallBoundary(old, [toolC1, next]);
    expect(balancedOld).toHaveLength(2);
    expect(balancedRecent).toHaveLength(1);
    expect(balancedOld).toEqual([old[0], toolC1]);
    expect(balancedOld[1]).toBe(toolC1);
    expect(balancedRecent).toEqual([next]);
  });

  it('moves every leading result, and nothing when recent starts with another message', () => {
    const old = [user('go'), calling('a', 'b')];
    expect(balanceToolCallBoundary(old, [result('a'), result('b'), assistant('done')]).map((part) => part.length)).toEqual([4, 1]);
    expect(balanceToolCallBoundary(old, [assistant('done'), result('x')]).map((part) => part.length)).toEqual([2, 2]);
    expect(balanceToolCallBoundary(old, [result('a')]).map((part) => part.length)).toEqual([3, 0]);
    expect(balanceToolCallBoundary([], [])).toEqual([[], []]);
  });

  it('returns new arrays, never the inputs', () => {
    const old = [user('go')];
    const recent = [assistant('done')];
    const [balancedOld, balancedRecent] = balanceToolCallBoundary(old, recent);
    expect(balancedOld).not.toBe(old);
    expect(balancedRecent).not.toBe(recent);
    expect(balancedOld).toEqual(old);
    expect(balancedRecent).toEqual(recent);
  });

  it('property: over any cut of a valid transcript, recent never starts with a tool message, both parts keep their pairs, and old ++ recent is the input', () => {
    fc.assert(
      fc.property(transcriptAndCutArbitrary, ([messages, cut]) => {
        const copy = structuredClone(messages);
        const old = messages.slice(0, cut);
        const recent = messages.slice(cut);
        const [balancedOld, balancedRecent] = balanceToolCallBoundary(old, recent);
        expect(balancedRecent[0]?.role).not.toBe('tool');
        expect(balancedOld.length).toBeGreaterThanOrEqual(cut);
        expect([...balancedOld, ...balancedRecent]).toEqual(messages);
        balancedOld.concat(balancedRecent).forEach((message, index) => expect(message).toBe(messages[index]));
        // A call and its results end up on the same side.
        expect(findPairProblems(balancedOld)).toEqual([]);
        expect(findPairProblems(balancedRecent)).toEqual([]);
        expect(messages).toEqual(copy);
        expect(old).toEqual(copy.slice(0, cut));
        expect(recent).toEqual(copy.slice(cut));
      }),
      propertyParameters,
    );
  });
});

describe('balanceCut', () => {
  it('moves a cut past the results standing right after it', () => {
    const messages = [user('go'), calling('a', 'b'), result('a'), result('b'), assistant('done')];
    expect(balanceCut(messages, 2)).toBe(4);
    expect(balanceCut(messages, 3)).toBe(4);
    expect(balanceCut(messages, 1)).toBe(1);
    expect(balanceCut(messages, 5)).toBe(5);
    expect(balanceCut([user('go'), calling('a'), result('a')], 2)).toBe(3);
  });

  it('property: agrees with balanceToolCallBoundary, never moves back, and separates no call from its results', () => {
    fc.assert(
      fc.property(transcriptAndCutArbitrary, ([messages, cut]) => {
        const copy = structuredClone(messages);
        const balanced = balanceCut(messages, cut);
        expect(balanced).toBeGreaterThanOrEqual(cut);
        expect(balanced).toBeLessThanOrEqual(messages.length);
        expect(messages[balanced]?.role).not.toBe('tool');
        for (let index = cut; index < balanced; index++) expect(messages[index]!.role).toBe('tool');
        expect(balanced).toBe(balanceToolCallBoundary(messages.slice(0, cut), messages.slice(cut))[0].length);
        expect(findPairProblems(messages.slice(0, balanced))).toEqual([]);
        expect(findPairProblems(messages.slice(balanced))).toEqual([]);
        expect(messages).toEqual(copy);
      }),
      propertyParameters,
    );
  });
});

describe('splitTurns', () => {
  it('@example: the head and the turns as arrays of the same message objects', () => {
    const user1 = user('1');
    const assistant1 = assistant('a1');
    const user2 = user('2');
    const split = splitTurns([system, user1, assistant1, user2]);
    expect(split).toEqual({ head: [system], turns: [[user1, assistant1], [user2]] });
    expect(split.head[0]).toBe(system);
    expect(split.turns[0]![1]).toBe(assistant1);
  });

  it('takes every leading system and developer message as the head', () => {
    const split = splitTurns([system, developer, user('1'), system]);
    expect(split.head).toEqual([system, developer]);
    expect(split.turns).toEqual([[user('1'), system]]);
  });

  it('makes the messages before the first user message a turn of their own', () => {
    const split = splitTurns([system, assistant('hello'), calling('c'), result('c'), user('1'), assistant('a')]);
    expect(split.turns).toEqual([[assistant('hello'), calling('c'), result('c')], [user('1'), assistant('a')]]);
  });

  it('keeps the pair after the head as a turn of its own, and starts a turn at every user message', () => {
    const split = splitTurns([system, summaryUser, summaryAssistant, user('1'), assistant('a'), user(mark('truncated', 'pasted')), user('2')]);
    expect(split.turns).toEqual([
      [summaryUser, summaryAssistant],
      [user('1'), assistant('a')],
      [user(mark('truncated', 'pasted'))],
      [user('2')],
    ]);
  });

  it('has no turns when there is only a head', () => {
    expect(splitTurns([system])).toEqual({ head: [system], turns: [] });
  });

  it('property: head ++ turns is the input, message for message; the input is not mutated', () => {
    fc.assert(
      fc.property(anyTranscriptArbitrary, (messages) => {
        const copy = structuredClone(messages);
        const { head, turns } = splitTurns(messages);
        const flat = [...head, ...turns.flat()];
        expect(flat).toHaveLength(messages.length);
        flat.forEach((message, index) => expect(message).toBe(messages[index]));
        expect(head.every((message) => message.role === 'system' || message.role === 'developer')).toBe(true);
        for (const turn of turns) expect(turn.length).toBeGreaterThan(0);
        for (const turn of turns.slice(1)) expect(isRealUserMessage(turn[0]!)).toBe(true);
        expect(messages).toEqual(copy);
      }),
      propertyParameters,
    );
  });
});
