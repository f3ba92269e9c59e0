import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import type { ChatMessage } from '../../src/transcript/message.js';
import { headLength } from '../../src/transcript/groups.js';
import { runNow } from '../../src/transcript/slices.js';
import { compressToolResults } from '../../src/transcript/compress/compress.js';
import { callsOfResults } from '../../src/transcript/compress/calls.js';
import { hasMarker } from '../../src/transcript/compress/markers.js';
import { succeeded } from '../../src/transcript/compress/result-outcome.js';
import { WIRE_FORMATS, type WireFormat } from '../../src/formats/registry.js';
import { readInput } from '../support/formats.js';

/**
 * Issue 32: a compressed result stands only for text the forwarded prompt
 * still holds raw. Random agent histories (ids reused every step as agents
 * do, identical results under other calls, failed re-reads, files edited
 * between reads, output that differs by design) are written in each of the
 * three wire formats, read into the chat view, compressed, written back
 * into the client's bytes and read again: for every result compressed as
 * identical, its text is the content of a later tool result that stayed raw;
 * for every result superseded, a later, successful result of the same call
 * in its own step stayed raw (the newer read of the same file).
 *
 * 10,000 random histories per format were run once by hand
 * (`NUM_RUNS=10000 npx vitest run test/compaction/compress-formats.property.test.ts --testTimeout 900000`,
 * 2026-12-02 00:24 UTC, load average 12–18: chat 26 s, Messages 33 s,
 * Responses 23 s, 82 s in all; every one held). The suite runs 300 per
 * format, so it stays a few seconds under load.
 */

const NUM_RUNS = Number(process.env['NUM_RUNS'] ?? 300);

type Tool = { name: string; args: Record<string, unknown> };
const TOOLS: readonly Tool[] = [
  { name: 'read_file', args: { path: 'src/a.ts' } },
  { name: 'read_file', args: { path: 'src/b.ts' } },
  { name: 'bash', args: { command: 'cd src && cat a.ts' } },
  { name: 'bash', args: { command: 'npm test' } },
  { name: 'BashOutput', args: { bash_id: 'shell_1' } },
  { name: 'grep', args: { pattern: 'total', path: 'src' } },
  { name: 'web_fetch', args: { url: 'https://shop.test/prices' } },
];
/** A few texts, so identical results under different calls are common; an error, an empty answer. */
const TEXTS: readonly string[] = [
  ...[1, 2, 3].map((version) => `// version ${version}\n${'export const total = price * qty;\n'.repeat(20)}`),
  ['$ npm test', ...Array.from({ length: 30 }, (_, index) => ` ✓ case ${index}`), 'Tests  30 passed'].join('\n'),
  'Error: 503 Service Unavailable',
  '',
];

interface StepSpec {
  readonly calls: ReadonlyArray<{ readonly tool: number; readonly text: number }>;
  readonly newTurn: boolean;
}

const stepArbitrary: fc.Arbitrary<StepSpec> = fc.record({
  calls: fc.array(fc.record({ tool: fc.nat({ max: TOOLS.length - 1 }), text: fc.nat({ max: TEXTS.length - 1 }) }), { minLength: 1, maxLength: 3 }),
  newTurn: fc.boolean(),
});

/** The chat history of the steps: ids `call_0`, `call_1`… in every step (reused, as agents do). */
function historyOf(steps: readonly StepSpec[]): ChatMessage[] {
  const messages: ChatMessage[] = [{ role: 'system', content: 'agent' }, { role: 'user', content: 'fix the build' }];
  steps.forEach((step, index) => {
    if (step.newTurn && index > 0) messages.push({ role: 'user', content: `next ${index}` });
    messages.push({
      role: 'assistant',
      content: '',
      tool_calls: step.calls.map((entry, position) => ({ id: `call_${position}`, type: 'function', function: { name: TOOLS[entry.tool]!.name, arguments: JSON.stringify(TOOLS[entry.tool]!.args) } })),
    });
    step.calls.forEach((entry, position) => messages.push({ role: 'tool', tool_call_id: `call_${position}`, content: TEXTS[entry.text]! }));
    messages.push({ role: 'assistant', content: `done ${index}` });
  });
  return messages;
}

/** The chat history as a body of each format. */
function bodyOf(format: WireFormat, messages: readonly ChatMessage[]): Record<string, unknown> {
  const url = format.urls[0]!;
  if (url.includes('chat')) return { model: 'm', messages };
  if (url.includes('messages')) {
    const wire: Array<Record<string, unknown>> = [];
    for (const message of messages.slice(1)) {
      if (message.role === 'tool') {
        const last = wire.at(-1);
        // A failed result says so with is_error, as Claude Code sends it.
        const block = { type: 'tool_result', tool_use_id: message.tool_call_id, content: message.content, ...(String(message.content).startsWith('Error:') ? { is_error: true } : {}) };
        if (last?.['role'] === 'user' && Array.isArray(last['content'])) (last['content'] as unknown[]).push(block);
        else wire.push({ role: 'user', content: [block] });
      } else if (message.role === 'assistant' && message.tool_calls) {
        wire.push({ role: 'assistant', content: message.tool_calls.map((call) => ({ type: 'tool_use', id: call.id, name: call.function.name, input: JSON.parse(call.function.arguments ?? '{}') })) });
      } else wire.push({ role: message.role, content: [{ type: 'text', text: String(message.content) }] });
    }
    return { model: 'm', max_tokens: 100, system: 'agent', messages: wire };
  }
  const input: Array<Record<string, unknown>> = [];
  for (const message of messages.slice(1)) {
    if (message.role === 'tool') input.push({ type: 'function_call_output', call_id: message.tool_call_id, output: message.content });
    else if (message.role === 'assistant' && message.tool_calls) for (const call of message.tool_calls) input.push({ type: 'function_call', call_id: call.id, name: call.function.name, arguments: call.function.arguments });
    else input.push({ type: 'message', role: message.role, content: String(message.content) });
  }
  return { model: 'm', instructions: 'agent', input };
}

function viewOf(format: WireFormat, bytes: Buffer): ChatMessage[] {
  return [...(runNow(format.read(readInput(bytes, 'repair'))).pairs.body.messages as ChatMessage[])];
}

const textOf = (message: ChatMessage): string =>
  typeof message.content === 'string' ? message.content : Array.isArray(message.content) ? message.content.map((part) => String(part['text'] ?? '')).join('') : '';

const caseArbitrary = fc.array(stepArbitrary, { minLength: 1, maxLength: 12 }).chain((steps) => {
  const messages = historyOf(steps);
  return fc.record({ messages: fc.constant(messages), to: fc.integer({ min: 2, max: messages.length }), minResultChars: fc.constantFrom(0, 400) });
});

describe.each(WIRE_FORMATS.map((format) => [format.urls[0]!, format] as const))('compression names only copies the prompt still holds (issue 32), %s', (_, format) => {
  it('every identical result is held raw by a later result, every superseded one by a later successful result of the same call', () => {
    fc.assert(
      fc.property(caseArbitrary, ({ messages, to, minResultChars }) => {
        const bytes = Buffer.from(JSON.stringify(bodyOf(format, messages)));
        const read = runNow(format.read(readInput(bytes, 'repair')));
        const view = read.pairs.body.messages as ChatMessage[];
        const head = headLength(view);
        const settings = { superseded: true, identical: true, structure: true, minResultChars, keepItems: 3, keepLines: 5, clear: { keep: 0, excludeTools: [] } };
        const { messages: out, compressed } = compressToolResults(view, { from: head, to: Math.min(to, view.length), settings });
        // Written back into the client's bytes and read again: what is forwarded, as the next request reads it.
        const forwarded = viewOf(format, read.bytesFor(bytes, out));
        expect(forwarded).toHaveLength(view.length);
        const calls = callsOfResults(view);
        const raw = (index: number): boolean => textOf(forwarded[index]!) === textOf(view[index]!) && !hasMarker(textOf(forwarded[index]!));
        for (const [index, kind] of compressed) {
          expect(textOf(forwarded[index]!)).toBe(textOf(out[index]!));
          const later = Array.from({ length: view.length - index - 1 }, (_, offset) => index + 1 + offset).filter((at) => view[at]!.role === 'tool' && raw(at));
          if (kind === 'identical') expect(later.some((at) => textOf(view[at]!) === textOf(view[index]!)), `identical ${index}`).toBe(true);
          if (kind === 'superseded') {
            const call = calls.get(index)!;
            // A read: a newer read of the same file is there raw. A command: a newer successful run of it is there, raw or
            // trimmed by its structure (its failures and summary kept, the trim's marker saying to run it again).
            const holders = call.kind === 'read' ? later : Array.from({ length: view.length - index - 1 }, (_, offset) => index + 1 + offset).filter((at) => view[at]!.role === 'tool' && (raw(at) || compressed.get(at) === 'structure'));
            expect(holders.some((at) => calls.get(at)?.key === call.key && succeeded(view[at]!, textOf(view[at]!))), `superseded ${index}`).toBe(true);
          }
          // Only reads and idempotent commands are compared; output that differs by design never is.
          expect(calls.get(index)?.kind).not.toBe('other');
        }
      }),
      { numRuns: NUM_RUNS },
    );
  });
});
