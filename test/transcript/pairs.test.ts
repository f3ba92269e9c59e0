import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import type { ChatMessage } from '../../src/transcript/message.js';
import {
  describePairProblem,
  findPairProblems,
  missingResult,
  repairPairs,
  MISSING_RESULT_TEXT,
} from '../../src/transcript/pairs.js';
import { isMarked } from '../../src/transcript/marks.js';
import {
  anyTranscriptArbitrary,
  call,
  corruptedTranscriptArbitrary,
  propertyParameters,
  validTranscriptArbitrary,
} from './arbitraries.js';

/**
 * An independent reading of DESIGN § Tool-call pairs, written from the rules
 * and not from pairs.ts: walk the messages keeping the calls of the current
 * block that still wait for a result.
 */
function isValidByTheRules(messages: readonly ChatMessage[]): boolean {
  let open = new Set<string>();
  for (const message of messages) {
    if (message.role === 'tool') {
      const id = typeof message.tool_call_id === 'string' ? message.tool_call_id : '';
      if (!open.delete(id)) return false;
      continue;
    }
    if (open.size > 0) return false; // a call lost its result before this message
    const calls = message.role === 'assistant' && Array.isArray(message.tool_calls) ? message.tool_calls : [];
    open = new Set(calls.map((toolCall) => toolCall.id));
    if (open.size !== calls.length) return false; // the rules ask for unique ids
  }
  return open.size === 0;
}

const user = (content: string): ChatMessage => ({ role: 'user', content });
const assistant = (...ids: string[]): ChatMessage => ({ role: 'assistant', content: '', tool_calls: ids.map((id) => call(id)) });
const result = (id: string, content = `result of ${id}`): ChatMessage => ({ role: 'tool', tool_call_id: id, content });

describe('findPairProblems', () => {
  it('@example: a result that answers no call is an orphan', () => {
    expect(findPairProblems([user('hi'), result('c9', '42')])).toEqual([{ index: 1, kind: 'orphan', toolCallId: 'c9' }]);
  });

  it('finds nothing wrong in a valid history, results in any order', () => {
    expect(findPairProblems([user('go'), assistant('a', 'b'), result('b'), result('a'), user('next')])).toEqual([]);
  });

  it('reports a call without a result at the assistant message', () => {
    expect(findPairProblems([user('go'), assistant('a', 'b'), result('a'), user('next')])).toEqual([
      { index: 1, kind: 'missing', toolCallId: 'b' },
    ]);
  });

  it('reports a result after another message as misplaced', () => {
    expect(findPairProblems([assistant('a'), user('wedged'), result('a')])).toEqual([
      { index: 2, kind: 'misplaced', toolCallId: 'a' },
    ]);
  });

  it('reports a second result for a call as a duplicate', () => {
    expect(findPairProblems([assistant('a'), result('a'), result('a')])).toEqual([
      { index: 2, kind: 'duplicate', toolCallId: 'a' },
    ]);
  });

  it('gives an empty id to a result without tool_call_id', () => {
    expect(findPairProblems([user('hi'), { role: 'tool', content: 'x' }])).toEqual([
      { index: 1, kind: 'orphan', toolCallId: '' },
    ]);
  });

  it('property: a valid transcript has no problems', () => {
    fc.assert(
      fc.property(validTranscriptArbitrary, (messages) => {
        expect(findPairProblems(messages)).toEqual([]);
        expect(isValidByTheRules(messages)).toBe(true);
      }),
      propertyParameters,
    );
  });

  it('property: reports problems exactly when the rules are broken', () => {
    fc.assert(
      fc.property(anyTranscriptArbitrary, (messages) => {
        expect(findPairProblems(messages).length === 0).toBe(isValidByTheRules(messages));
      }),
      propertyParameters,
    );
  });

  it('property: problems are ordered by index and point at a tool message, or an assistant for missing', () => {
    fc.assert(
      fc.property(corruptedTranscriptArbitrary, (messages) => {
        const problems = findPairProblems(messages);
        for (let position = 1; position < problems.length; position++) {
          expect(problems[position]!.index).toBeGreaterThanOrEqual(problems[position - 1]!.index);
        }
        for (const problem of problems) {
          expect(messages[problem.index]!.role).toBe(problem.kind === 'missing' ? 'assistant' : 'tool');
        }
      }),
      propertyParameters,
    );
  });
});

describe('repairPairs', () => {
  it('@example: gives an unanswered call a marked placeholder result right after its block', () => {
    const calling = assistant('c1');
    const next = user('go on');
    const { messages, repairs } = repairPairs([calling, next]);
    expect(messages).toEqual([
      calling,
      { role: 'tool', tool_call_id: 'c1', content: '[compacted:missing] no result was recorded for this call' },
      next,
    ]);
    expect(repairs).toEqual([{ index: 0, kind: 'missing', toolCallId: 'c1' }]);
  });

  it('returns the input array itself when nothing is wrong', () => {
    const messages = [user('go'), assistant('a'), result('a')];
    const repaired = repairPairs(messages);
    expect(repaired.messages).toBe(messages);
    expect(repaired.repairs).toEqual([]);
  });

  it('drops an orphan, drops a duplicate, moves a misplaced result up to its call', () => {
    const first = result('a');
    const orphan = result('zz');
    const duplicate = result('a', 'again');
    const late = result('b');
    const wedged = user('wedged');
    const calling = assistant('a', 'b');
    const { messages, repairs } = repairPairs([calling, first, orphan, duplicate, wedged, late]);
    expect(messages).toEqual([calling, first, late, wedged]);
    expect(messages[2]).toBe(late);
    expect(repairs.map((problem) => problem.kind)).toEqual(['orphan', 'duplicate', 'misplaced']);
  });

  it('moves a result that comes before its call down to follow it', () => {
    const early = result('a');
    const calling = assistant('a');
    const { messages } = repairPairs([user('go'), early, calling, user('next')]);
    expect(messages.map((message) => message.role)).toEqual(['user', 'assistant', 'tool', 'user']);
    expect(messages[2]).toBe(early);
  });

  it('places the placeholder of a call at the very end of the history', () => {
    const { messages } = repairPairs([user('go'), assistant('a')]);
    expect(messages[2]).toEqual(missingResult('a'));
    expect(isMarked(messages[2]!, 'missing')).toBe(true);
    expect(MISSING_RESULT_TEXT).toBe('no result was recorded for this call');
  });

  it('property: the repaired history has no problems and follows the rules', () => {
    fc.assert(
      fc.property(anyTranscriptArbitrary, (messages) => {
        const repaired = repairPairs(messages).messages;
        expect(findPairProblems(repaired)).toEqual([]);
        expect(isValidByTheRules(repaired)).toBe(true);
      }),
      propertyParameters,
    );
  });

  it('property: repairs are exactly the problems findPairProblems reports for the input', () => {
    fc.assert(
      fc.property(anyTranscriptArbitrary, (messages) => {
        expect(repairPairs(messages).repairs).toEqual(findPairProblems(messages));
      }),
      propertyParameters,
    );
  });

  it('property: a second repair returns the same array and reports nothing', () => {
    fc.assert(
      fc.property(anyTranscriptArbitrary, (messages) => {
        const once = repairPairs(messages).messages;
        const twice = repairPairs(once);
        expect(twice.messages).toBe(once);
        expect(twice.repairs).toEqual([]);
      }),
      propertyParameters,
    );
  });

  it('property: non-tool messages keep their order and are the same objects', () => {
    fc.assert(
      fc.property(anyTranscriptArbitrary, (messages) => {
        const repaired = repairPairs(messages).messages;
        const nonTool = (list: readonly ChatMessage[]) => list.filter((message) => message.role !== 'tool');
        const before = nonTool(messages);
        const after = nonTool(repaired);
        expect(after.length).toBe(before.length);
        after.forEach((message, index) => expect(message).toBe(before[index]));
      }),
      propertyParameters,
    );
  });

  it('property: each result is kept once as the same object or dropped; each repair is accounted for', () => {
    fc.assert(
      fc.property(anyTranscriptArbitrary, (messages) => {
        const { messages: repaired, repairs } = repairPairs(messages);
        const inputResults = new Set(messages.filter((message) => message.role === 'tool'));
        const seen = new Set<ChatMessage>();
        let placeholders = 0;
        for (const message of repaired) {
          if (message.role !== 'tool') continue;
          if (inputResults.has(message)) {
            expect(seen.has(message)).toBe(false);
            seen.add(message);
          } else {
            expect(message).toEqual(missingResult(message.tool_call_id ?? ''));
            placeholders++;
          }
        }
        const count = (kind: string) => repairs.filter((problem) => problem.kind === kind).length;
        expect(placeholders).toBe(count('missing'));
        expect(inputResults.size - seen.size).toBe(count('orphan') + count('duplicate'));
      }),
      propertyParameters,
    );
  });

  it('property: never mutates its input', () => {
    fc.assert(
      fc.property(anyTranscriptArbitrary, (messages) => {
        const copy = structuredClone(messages);
        const array = messages.slice();
        repairPairs(messages);
        expect(messages).toEqual(copy);
        messages.forEach((message, index) => expect(message).toBe(array[index]));
      }),
      propertyParameters,
    );
  });
});

describe('describePairProblem', () => {
  it('names the index and the call id, as a pairs: reject answer does', () => {
    expect(describePairProblem({ index: 7, kind: 'orphan', toolCallId: 'c9' })).toBe(
      'messages[7]: tool result "c9" answers no call',
    );
    expect(describePairProblem({ index: 2, kind: 'missing', toolCallId: 'c1' })).toBe(
      'messages[2]: tool call "c1" has no result before the next message',
    );
    expect(describePairProblem({ index: 3, kind: 'duplicate', toolCallId: 'c1' })).toContain('messages[3]');
    expect(describePairProblem({ index: 4, kind: 'misplaced', toolCallId: 'c1' })).toContain('"c1"');
  });
});
