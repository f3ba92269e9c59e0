import { describe, expect, it } from 'vitest';
import { PrefixLedger, type PrefixBreak } from '../../src/http/ledger/prefix-breaks.js';
import { prefixPrintOf } from '../../src/http/ledger/prefix-print.js';
import { mark } from '../../src/transcript/marks.js';
import { supersededMarker } from '../../src/transcript/compress/markers.js';
import { elisionMarker } from '../../src/transcript/prune.js';
import type { ChatMessage } from '../../src/transcript/message.js';
import { estimateMessageTokens } from '../../src/transcript/tokens.js';

/**
 * Issue 36 item 3: a scripted conversation replayed through the ledger, as
 * compactor would forward it request by request — client edits, a
 * compression, a summary, a truncation, a prune, a repair, a slot move and a
 * server-side miss — and every break's index and cause checked.
 */

const system: ChatMessage = { role: 'system', content: 'You are a careful coding agent.' };
const user = (n: number): ChatMessage => ({ role: 'user', content: `task ${n}: change the file` });
const call = (n: number): ChatMessage => ({ role: 'assistant', content: null, tool_calls: [{ id: `c${n}`, type: 'function', function: { name: 'read_file', arguments: '{"path":"a.ts"}' } }] });
const result = (n: number): ChatMessage => ({ role: 'tool', tool_call_id: `c${n}`, content: `line ${n}\n`.repeat(60) });
const done = (n: number): ChatMessage => ({ role: 'assistant', content: `done ${n}` });
const turn = (n: number): ChatMessage[] => [user(n), call(n), result(n), done(n)];

const tokens = (messages: readonly ChatMessage[]): number => messages.reduce((sum, message) => sum + Math.round(estimateMessageTokens(message)), 0);

describe('the prefix-break ledger (issue 36)', () => {
  it('names the index and the cause of every break of a scripted conversation', () => {
    const ledger = new PrefixLedger();
    const send = (client: ChatMessage[], forwarded: ChatMessage[] = client, facts: { slot?: number | null; cachedTokens?: number | null; repairs?: number } = {}): PrefixBreak[] =>
      ledger.observe(prefixPrintOf('tenant-a', 'm', client, forwarded), { slot: facts.slot ?? 0, cachedTokens: facts.cachedTokens ?? null, repairs: facts.repairs ?? 0 });

    // 1. Turns appended: no break.
    let client = [system, ...turn(1)];
    expect(send(client)).toEqual([]);
    client = [...client, ...turn(2)];
    expect(send(client)).toEqual([]);

    // 2. The client edits its own first user message: a break at index 1, the client's.
    client = [system, { role: 'user', content: 'task 1: change the file, carefully' }, ...client.slice(2), ...turn(3)];
    const edited = send(client);
    expect(edited).toEqual([{ cause: 'client', index: 1, keptTokens: tokens([system]), recomputedTokens: tokens(client.slice(1, 9)) }]);

    // 3. Compactor compresses the result at index 3 (superseded by the later read).
    const compressedResult: ChatMessage = { ...result(1), content: supersededMarker('read_file', 'c3', 2, 600) };
    const compressed = [...client.slice(0, 3), compressedResult, ...client.slice(4)];
    client = [...client, ...turn(4)];
    const withCompression = [...compressed, ...turn(4)];
    const compression = send(client, withCompression);
    expect(compression).toHaveLength(1);
    expect(compression[0]).toMatchObject({ cause: 'compression', index: 3, keptTokens: tokens(client.slice(0, 3)) });
    // What it re-reads: the compressed result and what follows it up to what the client added.
    expect(compression[0]!.recomputedTokens).toBe(tokens(withCompression.slice(3, 13)));

    // 4. The same epoch again, a turn later: no break.
    client = [...client, ...turn(5)];
    expect(send(client, [...withCompression, ...turn(5)])).toEqual([]);

    // 5. A summary replaces turns 1-3: the summary pair right after the head, index 1.
    const pair: ChatMessage[] = [
      { role: 'user', content: mark('summary', 'notes of turns 1-3') },
      { role: 'assistant', content: mark('summary', 'Understood; continuing from these notes.') },
    ];
    client = [...client, ...turn(6)];
    const summarized = [system, ...pair, ...client.slice(13)];
    expect(send(client, summarized)).toMatchObject([{ cause: 'summary', index: 1, keptTokens: tokens([system]) }]);

    // 6. The summary failed the next time: a truncation notice stands where the summary went.
    client = [...client, ...turn(7)];
    const truncated = [system, { role: 'user', content: mark('truncated', '12 earlier messages were omitted') }, ...client.slice(17)];
    expect(send(client, truncated)).toMatchObject([{ cause: 'truncation', index: 1 }]);

    // 7. An oversized result pruned in place (its elision marker), after the notice: index 4.
    client = [...client, ...turn(8)];
    const prunedResult: ChatMessage = { ...result(7), content: `line 7\n${elisionMarker(300)}line 7\n` };
    const pruned = [...truncated.slice(0, 4), prunedResult, ...truncated.slice(5), ...turn(8)];
    expect(send(client, pruned)).toMatchObject([{ cause: 'prune', index: 4 }]);

    // 8. A repair adds a stand-in for a missing tool result at the end of the kept part: its own cause.
    const missing: ChatMessage = { role: 'tool', tool_call_id: 'c8', content: mark('missing', 'no result was sent for this call') };
    client = [...client.slice(0, -2), { role: 'user', content: 'task 9' }];
    const repaired = [...pruned.slice(0, -2), missing, { role: 'user', content: 'task 9' }];
    expect(send(client, repaired, { repairs: 1 })).toMatchObject([{ cause: 'repair', index: repaired.length - 2 }]);

    // 9. The same prompt on another slot: the whole kept prefix is gone with the slot.
    client = [...client, ...turn(10)];
    const moved = [...repaired, ...turn(10)];
    const slot = send(client, moved, { slot: 1, repairs: 1 });
    expect(slot).toEqual([{ cause: 'slot', index: 0, keptTokens: 0, recomputedTokens: tokens(repaired) }]);

    // 10. Nothing changed, but the server says it reused only 10 tokens: its own miss (an eviction).
    client = [...client, ...turn(11)];
    const missed = send(client, [...moved, ...turn(11)], { slot: 1, cachedTokens: 10, repairs: 1 });
    expect(missed).toHaveLength(1);
    expect(missed[0]).toMatchObject({ cause: 'server', index: 0, keptTokens: 10 });
    expect(missed[0]!.recomputedTokens).toBe(tokens(moved) - 10);

    // 11. The server reused what the prefix holds: no disagreement.
    client = [...client, ...turn(12)];
    const kept = tokens([...moved, ...turn(11)]);
    expect(send(client, [...moved, ...turn(11), ...turn(12)], { slot: 1, cachedTokens: kept, repairs: 1 })).toEqual([]);
  });

  it('follows a conversation whose client changed its system prompt (another key, the same history)', () => {
    const ledger = new PrefixLedger();
    const facts = { slot: null, cachedTokens: null, repairs: 0 };
    const history = [system, ...turn(1), ...turn(2)];
    ledger.observe(prefixPrintOf('t', 'm', history, history), facts);
    const changed = [{ role: 'system', content: 'You are a terse coding agent.' } as ChatMessage, ...history.slice(1), ...turn(3)];
    expect(ledger.observe(prefixPrintOf('t', 'm', changed, changed), facts)).toEqual([{ cause: 'client', index: 0, keptTokens: 0, recomputedTokens: tokens(changed.slice(0, 9)) }]);
    // And the next request continues under the new key.
    const next = [...changed, ...turn(4)];
    expect(ledger.observe(prefixPrintOf('t', 'm', next, next), facts)).toEqual([]);
  });

  it('scales the tokens by what the upstream counted', () => {
    const ledger = new PrefixLedger();
    const first = [system, ...turn(1), ...turn(2)];
    const counted = tokens(first) * 2;
    ledger.observe(prefixPrintOf('t', 'm', first, first), { slot: null, cachedTokens: null, repairs: 0, promptTokens: counted });
    const edited = [system, user(9), ...first.slice(2)];
    const [broken] = ledger.observe(prefixPrintOf('t', 'm', edited, edited), { slot: null, cachedTokens: null, repairs: 0, promptTokens: counted });
    expect(broken).toMatchObject({ cause: 'client', index: 1, keptTokens: tokens([system]) * 2 });
  });

  it('keeps conversations apart by tenant, and forgets the one seen longest ago', () => {
    const ledger = new PrefixLedger({ maxConversations: 2 });
    const history = [system, ...turn(1)];
    const facts = { slot: null, cachedTokens: null, repairs: 0 };
    ledger.observe(prefixPrintOf('a', 'm', history, history), facts);
    // Another tenant's first request of the same history is no break of tenant a's.
    const edited = [system, user(1), { role: 'assistant', content: 'other' } as ChatMessage];
    expect(ledger.observe(prefixPrintOf('b', 'm', edited, edited), facts)).toEqual([]);
    ledger.observe(prefixPrintOf('c', 'm', history, history), facts);
    expect(ledger.conversationCount).toBe(2);
    // Tenant a was forgotten: its edit is a first request again.
    expect(ledger.observe(prefixPrintOf('a', 'm', edited, edited), facts)).toEqual([]);
  });

  it('keeps no message text', () => {
    const secret = 'the password is hunter2';
    const history: ChatMessage[] = [system, { role: 'user', content: secret }];
    const print = prefixPrintOf('t', 'm', history, history);
    const kept = [print.key, print.client.toString('latin1'), print.forwarded.toString('latin1')].join('');
    expect(kept).not.toContain('hunter2');
    expect(print.client.length).toBe(16);
  });
});
