import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatAt, readInput } from '../support/formats.js';
import type { ChatMessage } from '../../src/transcript/message.js';
import { findPairProblemSteps, repairPairSteps } from '../../src/transcript/pairs.js';
import { runInSlices, runNow, SLICE_ITEMS, type Slices } from '../../src/transcript/slices.js';
import { anyTranscriptArbitrary, call, propertyParameters } from '../transcript/arbitraries.js';

/**
 * Issue 21 item 1: the pair check of a large body never holds the event loop
 * for all of its messages. It runs a slice of items at a time (steps.ts), and
 * gives the same result in slices as at once. Slices are counted, never timed.
 */


/** Runs `steps` in slices, counting the pauses. */
async function counted<T>(steps: Slices<T>): Promise<{ value: T; pauses: number }> {
  let pauses = 0;
  const value = await runInSlices(steps, async () => {
    pauses++;
  });
  return { value, pauses };
}

/** The shape: `n` assistant messages each calling "x", then `n` results for "x" (all but one misplaced). */
function sharedId(n: number): ChatMessage[] {
  const messages: ChatMessage[] = [{ role: 'user', content: 'go' }];
  for (let index = 0; index < n; index++) messages.push({ role: 'assistant', content: '', tool_calls: [call('x')] });
  for (let index = 0; index < n; index++) messages.push({ role: 'tool', tool_call_id: 'x', content: 'r' });
  return messages;
}

describe('issue 21 item 1: the pair check of a large history runs in slices', () => {
  it('pauses at least once per slice of messages, and repairs exactly as at once', async () => {
    const messages = sharedId(10_000);
    const sliced = await counted(repairPairSteps(messages));
    // Each pass over the 20,001 messages (blocks, results in place, strays, the rebuilt list) pauses once per slice.
    expect(sliced.pauses).toBeGreaterThanOrEqual(Math.floor((2 * messages.length) / SLICE_ITEMS));
    expect(sliced.value).toEqual(runNow(repairPairSteps(messages)));
    expect(sliced.value.repairs).toHaveLength(9_999);
  });

  it('a small history is checked without a pause', async () => {
    expect((await counted(findPairProblemSteps(sharedId(100)))).pauses).toBe(0);
  });

  it('finds and repairs the same in slices as at once, for any history long enough to be sliced', async () => {
    // Random transcripts repeated past a slice: problems on both sides of a pause.
    const long = fc.array(anyTranscriptArbitrary, { minLength: 1, maxLength: 8 }).map((parts) => {
      const messages: ChatMessage[] = [];
      while (messages.length <= SLICE_ITEMS) for (const part of parts) messages.push(...part, { role: 'user', content: 'next' });
      return messages;
    });
    await fc.assert(
      fc.asyncProperty(long, async (messages) => {
        const repaired = await counted(repairPairSteps(messages));
        expect(repaired.pauses).toBeGreaterThan(0);
        expect(repaired.value).toEqual(runNow(repairPairSteps(messages)));
        expect((await counted(findPairProblemSteps(messages))).value).toEqual(runNow(findPairProblemSteps(messages)));
      }),
      { ...propertyParameters, numRuns: 20 },
    );
  });

  it('a chat body of 10,000 misplaced results is read in slices', async () => {
    const body = Buffer.from(JSON.stringify({ model: 'm', messages: sharedId(10_000) }));
    const sliced = await counted(formatAt('/v1/chat/completions').read(readInput(body, 'repair')));
    expect(sliced.pauses).toBeGreaterThanOrEqual(Math.floor(20_000 / SLICE_ITEMS));
    expect(sliced.value.pairs.report).toBe('repaired 9999 tool pairs');
  });

  it('a Messages turn of 20,000 tool_result blocks is viewed and checked in slices', async () => {
    const uses = Array.from({ length: 20_000 }, (_, index) => ({ type: 'tool_use', id: `t${index}`, name: 'f', input: {} }));
    const results = Array.from({ length: 20_000 }, (_, index) => ({ type: 'tool_result', tool_use_id: `t${index}`, content: 'r' }));
    const messages = [
      { role: 'user', content: 'go' },
      { role: 'assistant', content: uses },
      { role: 'user', content: [...results, { type: 'tool_result', tool_use_id: 'orphan', content: 'r' }] },
    ];
    const body = Buffer.from(JSON.stringify({ model: 'm', max_tokens: 16, messages }));
    const sliced = await counted(formatAt('/v1/messages').read(readInput(body, 'repair')));
    // The view of the 20,001 blocks, and the pair passes over the 20,003 chat messages.
    expect(sliced.pauses).toBeGreaterThanOrEqual(Math.floor((20_000 + 2 * 20_000) / SLICE_ITEMS));
    expect(sliced.value.pairs.report).toBe('repaired 1 tool pair');
  });
});
