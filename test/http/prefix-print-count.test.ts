import { describe, expect, it, vi } from 'vitest';
import { digestCalls } from '../support/counted-digests.js';
import { prefixPrintOf, WRITTEN } from '../../src/http/ledger/prefix-print.js';
import { summaryPair } from '../../src/transcript/marks.js';
import type { ChatMessage } from '../../src/transcript/message.js';

/**
 * Issue 40: a cached epoch forwards the very same summary and kept messages
 * (objects the epoch holds) in every request that applies it; the ledger's
 * print digested each of them anew every request (one of 21 KB on the
 * 36 KB bench). Counted as calls into node:crypto's digests.
 */

vi.mock('node:crypto', async (importOriginal) => (await import('../support/counted-digests.js')).countedCrypto(importOriginal));

const client: ChatMessage[] = [
  { role: 'system', content: 'You are a coding agent.' },
  { role: 'user', content: 'Fix the build.' },
  { role: 'assistant', content: 'Reading the logs.' },
  { role: 'user', content: 'And now?' },
];

describe("the ledger's print of what compactor wrote (issue 40)", () => {
  it('digests a message compactor wrote once, however many requests forward it', () => {
    const [summary, acknowledgement] = summaryPair('The agent read the logs.');
    const forwarded = [client[0]!, summary!, acknowledgement!, client[3]!];
    const first = prefixPrintOf('t', 'm', client, forwarded);
    const before = digestCalls.count;
    const again = prefixPrintOf('t', 'm', client, forwarded);
    // No known prefix given: the chain to the head (tenant and model, two messages) and the client's four messages
    // digested anew; the summary pair not again.
    expect(digestCalls.count - before).toBe(3 + client.length);
    expect(again).toEqual(first);
    expect([...again.written]).toEqual([WRITTEN.none, WRITTEN.summary, WRITTEN.summary, WRITTEN.none]);
    // Other objects with the same text are the same messages to the ledger.
    expect(prefixPrintOf('t', 'm', client, [client[0]!, ...summaryPair('The agent read the logs.'), client[3]!])).toEqual(first);
  });
});
