import { request as httpRequest, type IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { FakeUpstream } from '../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';
import { SlotLlama } from '../support/slot-llama.js';

/**
 * Issue 33 item 1: a slot lease ends when the upstream's answer ends, never
 * later because a client reads slowly. Two clients open streams on both
 * slots and stop reading; a third tenant's request must still be answered
 * (before: it waited until the stalled relays timed out, 40 s on the real
 * server). Events only: the third answer arriving is what the test waits for.
 */

const track = closedAfterEachTest();

function body(name: string, stream: boolean): string {
  return JSON.stringify({ model: 'm', stream, messages: [{ role: 'system', content: 'You are a coding agent.' }, { role: 'user', content: `${name}: go` }] });
}

/** A streamed request whose client reads the head, then nothing more (its socket stays open until `close`). */
function openAndStopReading(url: string, text: string, credential: string): Promise<{ readonly response: IncomingMessage; close(): void }> {
  return new Promise((resolve, reject) => {
    const sent = httpRequest(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${credential}` } }, (response) => {
      response.pause();
      resolve({ response, close: () => sent.destroy() });
    });
    sent.on('error', reject);
    sent.end(text);
  });
}

describe('a slot lease and a client that stops reading (issue 33 item 1)', () => {
  it("serves another tenant while two clients hold streams on both slots and read nothing", async () => {
    const upstream = track(await FakeUpstream.start());
    // An answer of ~6 MB: more than the sockets between compactor and a client that reads nothing can hold.
    new SlotLlama(upstream, { slots: 2, generatedTokens: 1_500_000 });
    const proxy = track(await startProxy(upstream, { listen: true, config: { upstream: { slots: 'auto', timeouts: { idle_ms: 600_000 } } } }));
    const readers = [await openAndStopReading(proxy.url, body('a', true), 'key-a'), await openAndStopReading(proxy.url, body('b', true), 'key-b')];
    try {
      for (const reader of readers) expect(reader.response.statusCode).toBe(200);
      const other = await fetch(`${proxy.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer key-c' }, body: body('c', false) });
      expect(other.status).toBe(200);
      const answer = (await other.json()) as { choices: Array<{ message: { content: string } }> };
      expect(answer.choices[0]!.message.content).toMatch(/^Answer of/);
    } finally {
      for (const reader of readers) reader.close();
    }
  });

  it('cuts a client that reads nothing within upstream.timeouts.idle_ms, and logs why', async () => {
    const upstream = track(await FakeUpstream.start());
    new SlotLlama(upstream, { slots: 2, generatedTokens: 1_500_000 });
    const proxy = track(await startProxy(upstream, { listen: true, config: { upstream: { slots: 'auto', timeouts: { idle_ms: 300 } } } }));
    const reader = await openAndStopReading(proxy.url, body('a', true), 'key-a');
    try {
      // The log line is written when compactor's side of the response closed (the client, reading nothing, sees no end).
      const line = await proxy.logs.request((entry) => entry['route'] === 'chat', 15_000);
      expect(line['error']).toBe('client_stalled');
      expect(line['status']).toBe(408);
    } finally {
      reader.close();
    }
  });
});
