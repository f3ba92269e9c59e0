import secureJson from 'secure-json-parse';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SCAN_SLICE_BYTES } from '../../src/formats/body-scan.js';
import { readJsonObject } from '../../src/formats/json-body.js';
import { PARSE_AHEAD_BYTES, parseAhead } from '../../src/formats/parse-ahead.js';
import { FakeUpstream, replies } from '../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';

/**
 * Issue 21 item 1, one level deeper: a message over 1 MiB has its `content`
 * list parsed block by block, the event loop turning after every MiB, and a
 * Messages turn rebuilt around a dropped block is written back from its
 * other blocks' own bytes. Turns, parses and serializations are counted,
 * never timed.
 */

const opened = closedAfterEachTest();
const UNBOUNDED = { maxItems: Number.POSITIVE_INFINITY, maxValues: Number.POSITIVE_INFINITY };
afterEach(() => vi.restoreAllMocks());
const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** One user turn of `count` tool_result blocks, about `bytes` in all, each answering a tool_use of the turn before. */
function messagesBody(count: number, bytes: number, results = (index: number, pad: string) => JSON.stringify({ type: 'tool_result', tool_use_id: `t${index}`, content: pad })): string {
  const pad = 'p'.repeat(Math.max(1, Math.floor(bytes / count) - 60));
  const uses = Array.from({ length: count }, (_, index) => JSON.stringify({ type: 'tool_use', id: `t${index}`, name: 'f', input: {} })).join(',');
  const blocks = Array.from({ length: count }, (_, index) => results(index, pad)).join(',');
  const orphan = JSON.stringify({ type: 'tool_result', tool_use_id: 'orphan', content: 'r' });
  return `{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"go"},{"role":"assistant","content":[${uses}]},{"role":"user","content":[${blocks},${orphan}]}]}`;
}

const largeText = (calls: unknown[][]): boolean => calls.some(([text]) => typeof text === 'string' && text.length > PARSE_AHEAD_BYTES / 2);

describe('issue 21: a message over 1 MiB is parsed block by block', () => {
  it('parses one 8 MiB turn a MiB at a time, to what JSON.parse makes of the whole', async () => {
    const text = messagesBody(2_000, 8 * SCAN_SLICE_BYTES);
    const raw = Buffer.from(text);
    const parses = vi.spyOn(secureJson, 'parse');
    let turns = 0;
    const ahead = await parseAhead(raw, 'messages', UNBOUNDED, async () => {
      turns++;
    });
    // About 8 turns to scan the body, 8 to scan the turn, 8 to parse its blocks.
    expect(turns).toBeGreaterThanOrEqual(22);
    expect(largeText(parses.mock.calls)).toBe(false);
    parses.mockRestore();
    expect(ahead?.body).toEqual(JSON.parse(text));
  });

  it('parses a turn whose blocks are written in ways a byte scanner could misread as JSON.parse does', async () => {
    const big = 'x'.repeat(PARSE_AHEAD_BYTES);
    for (const text of [
      `{"model":"m","messages":[{"role":"user","content":"string ${big}"}]}`,
      `{"model":"m","messages":[{"content":[{"type":"text","text":"a \\\\\\" ], b"} , {"type":"text","text":"${big}"} ],"role":"user","content":[ {"type":"text","text":"last ${big}"} ]}]}`,
      `{"model":"m","messages":[{"role":"user","c\\u006fntent":[ ],"pad":"${big}","n":1e400}]}`,
    ]) {
      const raw = Buffer.from(text);
      // As the read takes it (read-wire.ts): what parse-ahead parsed, else the whole-body parse.
      const ahead = await parseAhead(raw, 'messages', UNBOUNDED, turn);
      expect(ahead?.body ?? readJsonObject(raw, 'application/json')).toEqual(JSON.parse(text));
    }
  });

  it('writes a rebuilt Messages turn back from the client\'s own bytes of every block kept, serializing nothing large', async () => {
    const upstream = opened(await FakeUpstream.start());
    upstream.route('POST', '/v1/messages', replies.json(200, { id: 'msg_1', type: 'message', role: 'assistant', model: 'm', content: [{ type: 'text', text: 'ok' }], stop_reason: 'end_turn', usage: { input_tokens: 1, output_tokens: 1 } }));
    const proxy = opened(await startProxy(upstream));
    // Spacing and a number JSON.parse would round: only the client's own bytes keep them.
    const odd = (index: number, pad: string) => `{ "type" : "tool_result", "tool_use_id" : "t${index}", "content" : "${pad}", "n" : 9007199254740993 }`;
    const payload = messagesBody(40, 3 * PARSE_AHEAD_BYTES, odd);
    const serialized = vi.spyOn(JSON, 'stringify');
    const answer = await proxy.app.inject({ method: 'POST', url: '/v1/messages', headers: { 'content-type': 'application/json' }, payload });
    expect(answer.headers['x-compactor']).toContain('repaired 1 tool pair');
    const forwarded = upstream.requests[0]!.body.toString();
    const pad = 'p'.repeat(Math.floor((3 * PARSE_AHEAD_BYTES) / 40) - 60);
    for (const index of [0, 17, 39]) expect(forwarded).toContain(odd(index, pad));
    expect(forwarded).not.toContain('"orphan"');
    expect(serialized.mock.results.some((result) => typeof result.value === 'string' && result.value.length > PARSE_AHEAD_BYTES / 2)).toBe(false);
  });
});
