import secureJson from 'secure-json-parse';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { scanBody, SCAN_SLICE_BYTES } from '../../src/formats/body-scan.js';
import { readJsonObject } from '../../src/formats/json-body.js';
import { PARSE_AHEAD_BYTES, parseAhead } from '../../src/formats/parse-ahead.js';
import { FakeUpstream, replies } from '../support/fake-upstream.js';
import { largeJoins } from '../support/joins.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';

/**
 * Issue 21 item 2: a large body is scanned and parsed a piece at a time
 * (src/formats/parse-ahead.ts), the event loop turning between pieces; past
 * `limits.max_items` it is refused before anything parses it. The turns and
 * the parses are counted, never timed.
 */

const opened = closedAfterEachTest();
const UNBOUNDED = { maxItems: Number.POSITIVE_INFINITY, maxValues: Number.POSITIVE_INFINITY };
afterEach(() => vi.restoreAllMocks());
const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

const call = (id: string) => ({ id, type: 'function', function: { name: 'f', arguments: '{}' } });
/** Text that makes a body of `steps` steps about `bytes` long. */
const padding = (bytes: number, steps: number): string => 'p'.repeat(Math.max(1, Math.floor(bytes / Math.max(1, steps)) - 120));

function agentBody(steps: number, bytes: number) {
  const pad = padding(bytes, steps);
  const messages: unknown[] = [{ role: 'user', content: 'go' }];
  for (let index = 0; index < steps; index++) messages.push({ role: 'assistant', content: '', tool_calls: [call(`c${index}`)] }, { role: 'tool', tool_call_id: `c${index}`, content: `ok ${pad}` });
  return { model: 'm', messages };
}

/** What planning-cap.ts counts after a parse: each entry, and the elements of its `content` and `tool_calls` lists. */
function plannedItems(list: unknown): number {
  if (!Array.isArray(list)) return 0;
  let items = 0;
  for (const entry of list) {
    items++;
    if (typeof entry === 'object' && entry !== null) {
      const record = entry as Record<string, unknown>;
      for (const key of ['content', 'tool_calls']) if (Array.isArray(record[key])) items += (record[key] as unknown[]).length;
    }
  }
  return items;
}

/** Bodies over the parse-ahead size whose JSON is written in ways a byte scanner could misread. */
function trickyBodies(): string[] {
  const big = 'x'.repeat(PARSE_AHEAD_BYTES);
  return [
    JSON.stringify(agentBody(30, 2 * PARSE_AHEAD_BYTES)),
    `{"model":"m","m\\u0065ssages":[{"role":"user","content":"${big}"}, {"role":"tool","content":[{"type":"text","text":"]},{\\"["}]} ]}`,
    `{"messages":"first","model":"m","messages":[ {"role":"user","content":"a \\\\\\" ] , b"} ,{"role":"user","content":"${big}","n":[1,[2,{"k":[3]}]],"o":{"content":[1,2]}} ] , "tail":{"messages":[1]}}`,
    `{"model":"m","messages":[{"role":"user","content":"${big}"}],"messages":"the last one wins"}`,
    `\n {"model" : "m" , "messages" : [ ] , "pad" : "${big}" } \n`,
    `{"model":"m","messages":[{"role":"user","content":"é ✓ 😀 ${big}"}],"seed":1e400}`,
    `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"${big}"}]}],"messages":[1,2]}`,
  ];
}

describe('issue 21 item 2: a large body is scanned and parsed in pieces', () => {
  it('parses every body to what JSON.parse makes of the whole, and counts the items planning-cap.ts counts', async () => {
    for (const [index, text] of trickyBodies().entries()) {
      for (const listKey of ['messages', 'input']) {
        const raw = Buffer.from(text);
        // As the read takes it (read-wire.ts): what parse-ahead parsed, else the whole-body parse.
        const ahead = await parseAhead(raw, listKey, UNBOUNDED, turn);
        expect(ahead?.body ?? readJsonObject(raw, 'application/json'), `body ${index}, ${listKey}`).toEqual(JSON.parse(text));
        const scan = await scanBody(raw, listKey, UNBOUNDED, async () => undefined);
        expect(scan.followed, `body ${index}`).toBe(true);
        expect(scan.items, `body ${index}, ${listKey}`).toBe(plannedItems((JSON.parse(text) as Record<string, unknown>)[listKey]));
      }
    }
  });

  it('refuses what the whole-body parse refuses, in the same words', async () => {
    const big = 'x'.repeat(PARSE_AHEAD_BYTES);
    for (const text of [
      `{"model":"m","messages":[{"role":"user","content":"${big}"},]}`,
      `{"model":"m","messages":[{"role":"user","content":"${big}"} {"role":"user"}]}`,
      `{"model":"m","messages":[{"role":"user","content":"${big}","__proto__":{"x":1}}]}`,
      `{"model":"m","messages":[{"role":"user","content":"${big}"}]`,
      `{"model":"m","messages":[${'['.repeat(600)}${']'.repeat(600)}],"pad":"${big}"}`,
      `\ufeff{"model":"m","messages":[],"pad":"${big}"}`,
    ]) {
      const whole = (() => {
        try {
          return readJsonObject(Buffer.from(text), 'application/json');
        } catch (error) {
          return error;
        }
      })();
      const raw = Buffer.from(text);
      // Nothing parsed ahead: the read's whole-body parse refuses it.
      expect(await parseAhead(raw, 'messages', UNBOUNDED, turn)).toBeUndefined();
      expect(() => readJsonObject(raw, 'application/json')).toThrow((whole as Error).message);
    }
  });

  it('gives the event loop a turn after every MiB scanned and parsed', async () => {
    const raw = Buffer.from(JSON.stringify(agentBody(2_000, 8 * SCAN_SLICE_BYTES)));
    let turns = 0;
    const ahead = await parseAhead(raw, 'messages', UNBOUNDED, async () => {
      turns++;
    });
    // About 8 turns to scan and 8 to parse the list.
    expect(turns).toBeGreaterThanOrEqual(14);
    expect(ahead?.body).toEqual(JSON.parse(raw.toString()));
  });

  it('refuses a large body past limits.max_items with a 413 before anything parses it, on every chat route', async () => {
    const upstream = opened(await FakeUpstream.start());
    upstream.route('POST', '/v1/chat/completions', replies.chat());
    const proxy = opened(await startProxy(upstream, { config: { limits: { max_items: 1_000 } } }));
    const parses = vi.spyOn(secureJson, 'parse');
    const jsonParses = vi.spyOn(JSON, 'parse');
    const body = JSON.stringify(agentBody(600, 2 * PARSE_AHEAD_BYTES));
    for (const url of ['/v1/chat/completions', '/v1/compact', '/v1/messages', '/v1/responses']) {
      const payload = url === '/v1/responses' ? body.replace('"messages"', '"input"') : body;
      parses.mockClear();
      jsonParses.mockClear();
      const answer = await proxy.app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json' }, payload });
      expect(answer.statusCode, url).toBe(413);
      if (url !== '/v1/messages') expect(answer.json(), url).toMatchObject({ error: { code: 'request_too_complex', type: 'invalid_request_error' } });
      expect(answer.body, url).toContain('1000');
      expect(answer.body, url).toContain('limits.max_items');
      // Nothing the size of the body was parsed (the answer's own JSON may be).
      const parsedBody = [...parses.mock.calls, ...jsonParses.mock.calls].some(([text]) => typeof text === 'string' && text.length > PARSE_AHEAD_BYTES / 2);
      expect(parsedBody, url).toBe(false);
    }
    expect(upstream.requests).toHaveLength(0);
  });

  it('parses a large body with no conversation list in slices too, never whole (issue 34), and refuses it in the read\'s words', async () => {
    const upstream = opened(await FakeUpstream.start());
    const proxy = opened(await startProxy(upstream));
    const payload = JSON.stringify({ model: 'm', prompt: Array.from({ length: 250_000 }, (_, index) => `p${index}`) });
    expect(payload.length).toBeGreaterThan(2 * PARSE_AHEAD_BYTES);
    const jsonParses = vi.spyOn(JSON, 'parse');
    const answer = await proxy.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { 'content-type': 'application/json' }, payload });
    expect(answer.statusCode).toBe(400);
    expect(answer.json()).toMatchObject({ error: { param: 'messages' } });
    const longest = jsonParses.mock.calls.reduce((most, [text]) => Math.max(most, typeof text === 'string' ? text.length : 0), 0);
    expect(longest).toBeLessThan(PARSE_AHEAD_BYTES + 16);
    expect(upstream.requests).toHaveLength(0);
  });

  it('forwards a large body within the cap as it came', async () => {
    const upstream = opened(await FakeUpstream.start());
    upstream.route('POST', '/v1/chat/completions', replies.chat());
    const proxy = opened(await startProxy(upstream, { config: { limits: { max_items: 10_000 } } }));
    const payload = JSON.stringify(agentBody(600, 3 * PARSE_AHEAD_BYTES));
    const answer = await proxy.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { 'content-type': 'application/json' }, payload });
    expect(answer.statusCode).toBe(200);
    expect(upstream.requests).toHaveLength(1);
    expect(upstream.requests[0]!.body.toString()).toBe(payload);
  });

  it('writes a repaired large body back from the client\'s own bytes of every message kept, serializing only the new ones', async () => {
    const upstream = opened(await FakeUpstream.start());
    upstream.route('POST', '/v1/chat/completions', replies.chat());
    const proxy = opened(await startProxy(upstream));
    const pad = 'p'.repeat(PARSE_AHEAD_BYTES);
    // Spacing and a number JSON.parse would round: only the client's own bytes keep them.
    const kept = `{ "role" : "tool", "tool_call_id" : "c0", "content" : "${pad}", "seed" : 9007199254740993 }`;
    const payload = `{"model":"m","messages":[{"role":"user","content":"go"},{"role":"assistant","content":"","tool_calls":[{"id":"c0","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},${kept}]}`;
    const serialized = vi.spyOn(JSON, 'stringify');
    const answer = await proxy.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { 'content-type': 'application/json' }, payload });
    expect(answer.statusCode).toBe(200);
    expect(answer.headers['x-compactor']).toContain('repaired');
    const forwarded = upstream.requests[0]!.body.toString();
    expect(forwarded).toContain(kept);
    expect((JSON.parse(forwarded) as { messages: unknown[] }).messages).toHaveLength(4);
    const serializedLarge = serialized.mock.results.some((result) => typeof result.value === 'string' && result.value.length > PARSE_AHEAD_BYTES / 2);
    expect(serializedLarge).toBe(false);
  });

  it('joins a repaired large body\'s write-back a MiB per turn of the loop, never all at once (issue 34), on chat and Messages', async () => {
    const upstream = opened(await FakeUpstream.start());
    upstream.route('POST', '/v1/chat/completions', replies.chat());
    // An answer as https://docs.anthropic.com/en/api/messages documents it.
    upstream.route('POST', '/v1/messages', replies.json(200, { id: 'msg_1', type: 'message', role: 'assistant', model: 'm', content: [{ type: 'text', text: 'ok' }], stop_reason: 'end_turn', stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 } }));
    const proxy = opened(await startProxy(upstream));
    const pad = 'p'.repeat(PARSE_AHEAD_BYTES / 2);
    const results = Array.from({ length: 6 }, (_, index) => ({ role: 'tool', tool_call_id: `c${index}`, content: pad }));
    const chat = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'go' }, { role: 'assistant', content: '', tool_calls: [call('c0'), call('c1'), call('c2'), call('c3'), call('c4'), call('c5'), call('c6')] }, ...results] });
    const blocks = Array.from({ length: 6 }, (_, index) => ({ type: 'tool_result', tool_use_id: `t${index}`, content: pad }));
    const messages = JSON.stringify({ model: 'm', max_tokens: 8, messages: [{ role: 'user', content: 'go' }, { role: 'assistant', content: blocks.map((_, index) => ({ type: 'tool_use', id: `t${index}`, name: 'f', input: {} })) }, { role: 'user', content: [...blocks, { type: 'tool_result', tool_use_id: 'orphan', content: 'r' }] }] });
    for (const [url, payload] of [['/v1/chat/completions', chat], ['/v1/messages', messages]] as const) {
      const joins = largeJoins(PARSE_AHEAD_BYTES);
      const answer = await proxy.app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json' }, payload });
      expect(answer.statusCode, url).toBe(200);
      expect(answer.headers['x-compactor'], url).toContain('repaired');
      expect(joins.count, url).toBe(0);
      vi.restoreAllMocks();
    }
    // Both repaired bodies went upstream whole: 3 MiB of results each.
    expect(upstream.requests.map((request) => request.body.length > 3 * PARSE_AHEAD_BYTES)).toEqual([true, true]);
  });
});
