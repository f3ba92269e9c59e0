import { describe, expect, it } from 'vitest';
import { prefixPrintOf, prefixPrintSteps } from '../../src/http/ledger/prefix-print.js';
import type { ChatMessage } from '../../src/transcript/message.js';

/**
 * Issue 34, the 50 ms `/healthz` target, planning's stalls: measured on a
 * 32 MiB body (bench/hostile-bodies.ts, a CPU profile's longest stretch
 * without a turn of the loop), the largest one left after the sliced parse
 * was the prefix-break ledger's print of the request (prefix-print.ts:
 * every message's canonical text hashed, twice when the body changed),
 * 200–460 ms in one piece. It is taken as steps now, a pause allowed after
 * every MiB of text hashed or 2,048 messages. Pauses are counted, never
 * timed.
 */

const call = (id: string) => ({ id, type: 'function' as const, function: { name: 'f', arguments: '{}' } });

/** An agent loop of `steps` steps whose results hold `bytes` of text in all. */
function history(steps: number, bytes: number): ChatMessage[] {
  const pad = 'p'.repeat(Math.floor(bytes / steps));
  const messages: ChatMessage[] = [{ role: 'user', content: 'go' }];
  for (let index = 0; index < steps; index++) messages.push({ role: 'assistant', content: '', tool_calls: [call(`c${index}`)] }, { role: 'tool', tool_call_id: `c${index}`, content: pad });
  return messages;
}

/** Runs `steps`, counting its pauses. */
function pausesOf<T>(steps: Generator<void, T, undefined>): { value: T; pauses: number } {
  let pauses = 0;
  let next = steps.next();
  while (next.done !== true) {
    pauses++;
    next = steps.next();
  }
  return { value: next.value, pauses };
}

describe('issue 34: planning\'s passes over a large history pause', () => {
  it('the prefix print of 8 MiB in 200 messages pauses after every MiB hashed, and prints what it printed whole', () => {
    const client = history(100, 8 * 1024 * 1024);
    const { value, pauses } = pausesOf(prefixPrintSteps('t', 'm', client, client));
    expect(pauses).toBeGreaterThanOrEqual(7);
    expect(value).toEqual(prefixPrintOf('t', 'm', client, client));
  });

  it('the prefix print of 10,000 short messages pauses every 2,048, for the client\'s and the forwarded list', () => {
    const client = history(5_000, 1024 * 1024 / 2);
    const forwarded = [...client.slice(0, 1), { role: 'user' as const, content: 'a summary' }, ...client.slice(4_001)];
    const { value, pauses } = pausesOf(prefixPrintSteps('t', 'm', client, forwarded));
    // 10,001 client messages (4 pauses at least) and 6,001 forwarded ones, hashed then estimated (2 each at least).
    expect(pauses).toBeGreaterThanOrEqual(8);
    expect(value).toEqual(prefixPrintOf('t', 'm', client, forwarded));
  });
});
