import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/transcript/message.js';
import { findPairProblems, repairPairs } from '../../src/transcript/pairs.js';
import { balanceCut, splitTurns, stepRanges, taskAnchorIndex, turnRanges } from '../../src/transcript/groups.js';
import { pruneToolResults } from '../../src/transcript/prune.js';
import { estimateRequestTokens } from '../../src/transcript/tokens.js';
import { renderTranscript } from '../../src/transcript/render.js';
import { prefixHashes } from '../../src/compaction/epochs/prefix-hash.js';
import { spliceMessages } from '../../src/formats/splice.js';
import { runNow } from '../../src/transcript/slices.js';
import { formatAt, readInput } from '../support/formats.js';
import { messagesView } from '../../src/formats/messages/read.js';
import { messagesFromView } from '../../src/formats/messages/write.js';
import { responsesView } from '../../src/formats/responses/read.js';
import { itemsFromView } from '../../src/formats/responses/write.js';
import { growth } from '../support/work-meter.js';

/**
 * Issue 21 item 1: every pass over `messages` does work proportional to the
 * request. Each case doubles the input of the worst shape found for that pass
 * and checks the counted work (array elements visited, input fields read; see
 * the meter) grows at most 2.5x: a quadratic pass grows ~4x.
 */
const SIZE = 2_000;
const MAX_GROWTH = 2.5;

const call = (id: string) => ({ id, type: 'function', function: { name: 'f', arguments: '{}' } });

/** The shape: n assistant messages each calling "x", then n results for "x" (all misplaced but the last). */
function sharedIdHistory(n: number): ChatMessage[] {
  const messages: ChatMessage[] = [{ role: 'user', content: 'go' }];
  for (let index = 0; index < n; index++) messages.push({ role: 'assistant', content: '', tool_calls: [call('x')] });
  for (let index = 0; index < n; index++) messages.push({ role: 'tool', tool_call_id: 'x', content: 'r' });
  return messages;
}

/** Results standing before their calls: each misplaced result looks for the nearest later block. */
function resultsFirstHistory(n: number): ChatMessage[] {
  const messages: ChatMessage[] = [{ role: 'user', content: 'go' }];
  for (let index = 0; index < n; index++) messages.push({ role: 'tool', tool_call_id: 'x', content: 'r' });
  for (let index = 0; index < n; index++) messages.push({ role: 'assistant', content: '', tool_calls: [call('x')] }, { role: 'user', content: 'u' });
  return messages;
}

/** One block of n calls answered in reverse order, plus duplicates and orphans. */
function reversedBlockHistory(n: number): ChatMessage[] {
  const calls = Array.from({ length: n }, (_, index) => call(`c${index}`));
  const results = calls.map((toolCall) => ({ role: 'tool', tool_call_id: toolCall.id, content: 'r' }) as ChatMessage).reverse();
  return [{ role: 'user', content: 'go' }, { role: 'assistant', content: '', tool_calls: calls }, ...results, ...results, { role: 'tool', tool_call_id: 'orphan', content: 'r' }];
}

/** An agent loop: turns of steps with results long enough to prune. */
function agentHistory(n: number): ChatMessage[] {
  const messages: ChatMessage[] = [{ role: 'system', content: 'sys' }];
  for (let index = 0; index < n; index++) {
    if (index % 5 === 0) messages.push({ role: 'user', content: `turn ${index}` });
    messages.push({ role: 'assistant', content: '', tool_calls: [call(`c${index}`)] }, { role: 'tool', tool_call_id: `c${index}`, content: 'y'.repeat(40) });
  }
  return messages;
}

function messagesBody(n: number): { model: string; messages: Record<string, unknown>[] } {
  const uses = Array.from({ length: n }, (_, index) => ({ type: 'tool_use', id: `t${index}`, name: 'f', input: {} }));
  const results = uses.map((use) => ({ type: 'tool_result', tool_use_id: use.id, content: 'r' }));
  return {
    model: 'm',
    messages: [
      { role: 'user', content: 'go' },
      { role: 'assistant', content: uses },
      { role: 'user', content: [...results, { type: 'tool_result', tool_use_id: 'orphan', content: 'r' }, { type: 'text', text: 'next' }] },
    ],
  };
}

function responsesBody(n: number): { model: string; input: Record<string, unknown>[] } {
  const calls = Array.from({ length: n }, (_, index) => ({ type: 'function_call', call_id: `t${index}`, name: 'f', arguments: '{}' }));
  const outputs = calls.map((item) => ({ type: 'function_call_output', call_id: item.call_id, output: 'r' }));
  return { model: 'm', input: [{ role: 'user', content: 'go' }, ...calls, ...outputs, { type: 'function_call_output', call_id: 'orphan', output: 'r' }] };
}

function expectLinear(build: (n: number) => unknown, pass: (input: never) => unknown): void {
  const { small, large, ratio } = growth(build, pass, SIZE);
  expect({ small, large, ratio: Math.round(ratio * 100) / 100 }).toEqual({ small, large, ratio: expect.any(Number) });
  expect(ratio, `work ${small} -> ${large} when the input doubles`).toBeLessThanOrEqual(MAX_GROWTH);
}

describe('linear work: doubling the input at most ~2.5x the work (issue 21 item 1)', () => {
  it('pair checking, n calls sharing one id then their n results', () => {
    expectLinear(sharedIdHistory, (messages: ChatMessage[]) => findPairProblems(messages));
    expectLinear(sharedIdHistory, (messages: ChatMessage[]) => repairPairs(messages));
  });

  it('pair checking, results standing before their calls', () => {
    expectLinear(resultsFirstHistory, (messages: ChatMessage[]) => repairPairs(messages));
  });

  it('pair checking, one block answered in reverse with duplicates and an orphan', () => {
    expectLinear(reversedBlockHistory, (messages: ChatMessage[]) => repairPairs(messages));
  });

  it('groups: turns, steps, the task anchor and a cut', () => {
    expectLinear(agentHistory, (messages: ChatMessage[]) => {
      for (const range of turnRanges(messages)) stepRanges(messages, range);
      splitTurns(messages);
      taskAnchorIndex(messages);
      balanceCut(messages, 1);
    });
  });

  it('prune, tokens, rendering and the hash chain', () => {
    expectLinear(agentHistory, (messages: ChatMessage[]) => pruneToolResults(messages, 10));
    expectLinear(agentHistory, (messages: ChatMessage[]) => estimateRequestTokens({ messages }));
    expectLinear(agentHistory, (messages: ChatMessage[]) => renderTranscript(messages));
    expectLinear(agentHistory, (messages: ChatMessage[]) => prefixHashes({ tenant: 't', model: 'm' }, messages));
  });

  it('the chat read, repair and splice of the forwarded body', () => {
    const raw = (n: number) => Buffer.from(JSON.stringify({ model: 'm', messages: sharedIdHistory(n) }));
    expectLinear(raw, (bytes: Buffer) => {
      const outcome = runNow(formatAt('/v1/chat/completions').read(readInput(Buffer.from(bytes), 'repair'))).pairs;
      spliceMessages(Buffer.from(bytes), outcome.body.messages);
    });
  });

  it('the splice of the forwarded body, with many top-level keys besides messages', () => {
    const raw = (n: number) => Buffer.from(`{"model":"m",${Array.from({ length: n }, (_, index) => `"k${index}":${index}`).join(',')},"messages":[{"role":"user","content":"hi"}]}`);
    expectLinear(raw, (bytes: Buffer) => spliceMessages(Buffer.from(bytes), [{ role: 'user', content: 'hello' }]));
  });

  it('the Messages adapter: 2n blocks in two turns and one orphan, read, repaired and written back', () => {
    expectLinear(messagesBody, (body: ReturnType<typeof messagesBody>) => {
      const view = messagesView(body);
      messagesFromView(view, repairPairs(view.chat.messages).messages);
    });
  });

  it('the Responses adapter: n calls, n outputs and one orphan, read, repaired and written back', () => {
    expectLinear(responsesBody, (body: ReturnType<typeof responsesBody>) => {
      const view = responsesView(body);
      itemsFromView(view, repairPairs(view.chat.messages).messages);
    });
  });
});
