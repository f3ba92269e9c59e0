import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import type { ChatMessage } from '../../../src/transcript/message.js';
import { compressToolResults } from '../../../src/transcript/compress/compress.js';
import { propertyParameters } from '../arbitraries.js';

/**
 * Issue 25, item 3: compression never loses what the model needs now. Agent
 * histories that re-read changing files and re-run commands, with planted
 * facts (`FACT-n`) in file text and in the failure lines of test output.
 */

interface Step {
  readonly tool: 'read_file' | 'bash';
  readonly target: number;
  /** Words of the result; facts among them. */
  readonly lines: readonly string[];
}

const word = fc.constantFrom('alpha', 'beta', 'gamma', 'delta', 'return', 'const', 'value', '=', '{', '}');
const factLine = fc.nat({ max: 60 }).map((fact) => `FACT-${fact}`);
const readLine = fc.oneof({ weight: 5, arbitrary: fc.array(word, { minLength: 1, maxLength: 8 }).map((words) => words.join(' ')) }, { weight: 1, arbitrary: factLine.map((fact) => `// note ${fact}`) });
const testLine = fc.oneof({ weight: 5, arbitrary: fc.nat({ max: 99 }).map((n) => `  ✓ case ${n} works`) }, { weight: 1, arbitrary: factLine.map((fact) => `FAIL case ${fact}: expected 1`) });

const stepArbitrary: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ tool: fc.constant('read_file' as const), target: fc.nat({ max: 2 }), lines: fc.array(readLine, { minLength: 1, maxLength: 60 }) }),
  fc.record({ tool: fc.constant('bash' as const), target: fc.nat({ max: 1 }), lines: fc.array(testLine, { minLength: 1, maxLength: 60 }) }),
);

function historyOf(steps: readonly Step[]): ChatMessage[] {
  const messages: ChatMessage[] = [{ role: 'system', content: 'agent' }, { role: 'user', content: 'fix the build' }];
  steps.forEach((step, index) => {
    const id = `c${index}`;
    const args = step.tool === 'read_file' ? { path: `src/file${step.target}.ts` } : { cmd: step.target === 0 ? 'npm test' : 'npm run lint' };
    messages.push({ role: 'assistant', content: '', tool_calls: [{ id, type: 'function', function: { name: step.tool, arguments: JSON.stringify(args) } }] });
    messages.push({ role: 'tool', tool_call_id: id, content: step.lines.join('\n') });
  });
  return messages;
}

const factsOf = (text: string): Set<string> => new Set(text.match(/FACT-\d+/g) ?? []);
const textOf = (messages: readonly ChatMessage[]): string => messages.map((message) => (typeof message.content === 'string' ? message.content : '')).join('\n');
const callKeyOf = (messages: readonly ChatMessage[], index: number): string => {
  const id = messages[index]!.tool_call_id;
  const call = messages[index - 1]!.tool_calls?.find((entry) => entry.id === id);
  return `${call?.function.name} ${call?.function.arguments}`;
};

const caseArbitrary = fc.array(stepArbitrary, { minLength: 1, maxLength: 25 }).chain((steps) => {
  const messages = historyOf(steps);
  return fc.record({ messages: fc.constant(messages), protectedFrom: fc.integer({ min: 2, max: messages.length }), minResultChars: fc.constantFrom(0, 40, 400) });
});

describe('compression keeps what the model needs (issue 25, item 3)', () => {
  it('every token of the newest copy of each read survives', () => {
    fc.assert(
      fc.property(caseArbitrary, ({ messages, protectedFrom, minResultChars }) => {
        const out = compressToolResults(messages, { from: 0, to: protectedFrom, settings: { ...defaults(), minResultChars } }).messages;
        const newest = new Map<string, number>();
        messages.forEach((message, index) => {
          if (message.role === 'tool' && callKeyOf(messages, index).startsWith('read_file')) newest.set(callKeyOf(messages, index), index);
        });
        const outTokens = new Set(textOf(out).split(/\s+/));
        for (const index of newest.values()) {
          for (const token of String(messages[index]!.content).split(/\s+/).filter(Boolean)) expect(outTokens.has(token)).toBe(true);
        }
      }),
      propertyParameters,
    );
  });

  it('results in the protected tail are never touched', () => {
    fc.assert(
      fc.property(caseArbitrary, ({ messages, protectedFrom, minResultChars }) => {
        const out = compressToolResults(messages, { from: 0, to: protectedFrom, settings: { ...defaults(), minResultChars } }).messages;
        expect(out).toHaveLength(messages.length);
        for (let index = protectedFrom; index < messages.length; index++) expect(out[index]).toBe(messages[index]);
        for (let index = 0; index < messages.length; index++) if (messages[index]!.role !== 'tool') expect(out[index]).toBe(messages[index]);
      }),
      propertyParameters,
    );
  });

  it('planted facts in superseded copies survive only where a newer copy holds them; every other fact survives', () => {
    fc.assert(
      fc.property(caseArbitrary, ({ messages, protectedFrom, minResultChars }) => {
        const { messages: out, compressed } = compressToolResults(messages, { from: 0, to: protectedFrom, settings: { ...defaults(), minResultChars } });
        const replaced = [...compressed].filter(([, kind]) => kind === 'superseded' || kind === 'identical').map(([index]) => index);
        // A copy is replaced only where a later result holds the newer copy (the same call) or the same text.
        for (const index of replaced) {
          const later = messages.slice(index + 1).some((message, offset) => message.role === 'tool' && (callKeyOf(messages, index + 1 + offset) === callKeyOf(messages, index) || message.content === messages[index]!.content));
          expect(later).toBe(true);
        }
        const holders = messages.filter((_, index) => !replaced.includes(index));
        expect(factsOf(textOf(out))).toEqual(factsOf(textOf(holders)));
      }),
      propertyParameters,
    );
  });

  it('is idempotent', () => {
    fc.assert(
      fc.property(caseArbitrary, ({ messages, protectedFrom, minResultChars }) => {
        const options = { from: 0, to: protectedFrom, settings: { ...defaults(), minResultChars } };
        const once = compressToolResults(messages, options).messages;
        expect(compressToolResults(once, options).messages).toBe(once);
      }),
      propertyParameters,
    );
  });
});

function defaults(): Parameters<typeof compressToolResults>[1] extends infer O ? (O extends { settings?: infer S } ? NonNullable<S> : never) : never {
  return { superseded: true, identical: true, structure: true, minResultChars: 400, keepItems: 3, keepLines: 5, clear: { keep: 0, excludeTools: [] } };
}
