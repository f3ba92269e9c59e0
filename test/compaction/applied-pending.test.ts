import { describe, expect, it } from 'vitest';
import { budgetOf } from '../../src/compaction/policy/budget.js';
import { appliedPending } from '../../src/compaction/policy/applied-pending.js';
import { decisionSettingsOf } from '../../src/compaction/policy/decide.js';
import { candidateOf } from '../../src/compaction/policy/plan.js';
import type { Epoch } from '../../src/compaction/types.js';
import type { ChatMessage } from '../../src/transcript/message.js';
import { mark } from '../../src/transcript/marks.js';
import { configWith } from '../support/compaction.js';
import { reReadConversation } from '../support/re-reads.js';

/** Issue 25: a summary prepared in the background compresses what it keeps when it is applied at the crossing. */

const budget = budgetOf(32_768, undefined, 1024, 1024);
const hashesOf = (messages: readonly ChatMessage[]): string[] => Array.from({ length: messages.length + 1 }, (_, index) => `h${index}`);

/** A pending summary of the first 6 turns of a re-read history, prepared when it had 9 turns: it keeps turns 7 and 8 raw. */
function pendingOf(messages: readonly ChatMessage[]): Epoch {
  const kept = messages.findIndex((message) => message.role === 'user' && String(message.content).startsWith('Turn 7:'));
  const seen = messages.findIndex((message) => message.role === 'user' && String(message.content).startsWith('Turn 9:')) + 1;
  const replacement = [messages[0]!, { role: 'user', content: mark('summary', 'notes') }, { role: 'assistant', content: mark('summary', 'Understood; continuing from these notes.') }, ...messages.slice(kept, seen - 1)];
  return { key: `h${seen}`, sourceLength: seen - 1, seenLength: seen, replacement, marked: [1, 2], notes: 'notes', strategy: 'summary', report: 'summarized 40 messages -> 1 summary + 12 kept (9.0k -> 3.0k tokens, 1.0s)', pending: true };
}

describe('a pending epoch applied at the crossing', () => {
  const settings = decisionSettingsOf(configWith().compaction);
  const messages = reReadConversation(24);
  const history = { messages, hashes: hashesOf(messages), toolsEstimate: 0, budget };
  const pending = pendingOf(messages);

  it('compresses the results it leaves that later calls superseded, once, in the epoch it stores in use', () => {
    const applied = appliedPending(pending, history, settings, 1);
    expect(applied.pending).toBe(false);
    expect(applied.report).toMatch(/^compressed \d+ tool results \(\d+(\.\d)?k? -> \d+(\.\d)?k? tokens\), summarized 40 messages -> 1 summary \+ 12 kept/);
    // It starts as the pending epoch did (the summary pair where it was) and covers more: keyed by the whole history, whose later calls its markers name.
    expect(applied.replacement.slice(0, 3)).toEqual(pending.replacement.slice(0, 3));
    expect(applied.replacement.length).toBeGreaterThan(pending.replacement.length);
    expect(applied).toMatchObject({ marked: [1, 2], notes: 'notes', strategy: 'summary', seenLength: messages.length, key: `h${messages.length}` });
    expect(applied.replacement.some((message) => message.role === 'tool' && String(message.content).includes('[compressed: superseded by call '))).toBe(true);
    // What follows the epoch is the original history from its sourceLength on, and the current turn is never touched.
    const forwarded = candidateOf(messages, applied).messages;
    expect(forwarded.at(-1)).toBe(messages.at(-1));
    expect(forwarded.length).toBe(applied.replacement.length + messages.length - applied.sourceLength);
    // Applied again to the same history, it is the same epoch: decided once, replayed byte for byte.
    expect(JSON.stringify(appliedPending(pending, history, settings, 1))).toBe(JSON.stringify(applied));
  });

  it('is the pending epoch as it was, in use, with the tier off', () => {
    const off = decisionSettingsOf(configWith({ compaction: { compress: { enabled: false } } }).compaction);
    expect(appliedPending(pending, history, off, 1)).toEqual({ ...pending, pending: false });
  });
});
