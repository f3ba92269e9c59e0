import { afterEach, describe, expect, it, vi } from 'vitest';
import { SCAN_SLICE_BYTES } from '../../src/formats/body-scan.js';
import { readJsonObject } from '../../src/formats/json-body.js';
import { parseAhead } from '../../src/formats/parse-ahead.js';
import { FakeUpstream, replies } from '../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';

/**
 * Issue 34 item 2: every JSON value counts toward `limits.max_values`
 * (containers and scalars, at any depth, in every part of the body), counted
 * by the scan before any parse; and everything over a slice is parsed in
 * slices, not only the conversation list. One 28.6 MiB body of 10 million
 * empty objects (no messages, parts or calls, so `limits.max_items` never
 * counted them) held `/healthz` 13.2 s and took 1.7 GB. Parses and turns
 * are counted, never timed.
 */

const opened = closedAfterEachTest();
afterEach(() => vi.restoreAllMocks());

const uncounted = (count: number): string => `{"model":"m","messages":[{"role":"user","content":"go"}],"x":[${'{},'.repeat(count - 1)}{}]}`;

/** The longest text JSON.parse was handed since the spy began. */
const longestParsed = (spy: { mock: { calls: unknown[][] } }): number => spy.mock.calls.reduce((most, [text]) => Math.max(most, typeof text === 'string' ? text.length : 0), 0);

describe('issue 34 item 2: values nobody counted', () => {
  it('10 million empty objects in 28.6 MiB are refused with a 413 naming limits.max_values before any parse, on every chat route', async () => {
    const upstream = opened(await FakeUpstream.start());
    upstream.route('POST', '/v1/chat/completions', replies.chat());
    const proxy = opened(await startProxy(upstream));
    const body = uncounted(10_000_000);
    expect((Buffer.byteLength(body) / 1048576).toFixed(1)).toBe('28.6');
    const parses = vi.spyOn(JSON, 'parse');
    for (const url of ['/v1/chat/completions', '/v1/messages', '/v1/responses', '/v1/compact']) {
      parses.mockClear();
      const payload = url === '/v1/responses' ? body.replace('"messages"', '"input"') : body;
      const answer = await proxy.app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json' }, payload });
      expect(answer.statusCode, url).toBe(413);
      expect(answer.body, url).toContain('limits.max_values');
      expect(answer.body, url).toContain('500000');
      // Nothing of the body was parsed (the answer's own JSON may be).
      expect(longestParsed(parses), url).toBeLessThan(1024);
    }
    expect(upstream.requests).toHaveLength(0);
  }, 120_000);

  it('a small body past a lowered limits.max_values is refused too (a body of n bytes holds up to n / 2 + 1 values)', async () => {
    const upstream = opened(await FakeUpstream.start());
    const proxy = opened(await startProxy(upstream, { config: { limits: { max_values: 1_000 } } }));
    const answer = await proxy.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { 'content-type': 'application/json' }, payload: uncounted(2_000) });
    expect(answer.statusCode).toBe(413);
    expect(answer.json()).toMatchObject({ error: { code: 'request_too_complex', message: expect.stringContaining('limits.max_values') } });
  });

  it('within the bound, a large value beside the messages is parsed in slices, a turn every MiB, to what JSON.parse makes of it', async () => {
    const text = uncounted(600_000);
    const raw = Buffer.from(text);
    const parses = vi.spyOn(JSON, 'parse');
    let turns = 0;
    const ahead = await parseAhead(raw, 'messages', { maxItems: 50_000, maxValues: 3_000_000 }, async () => {
      turns++;
    });
    expect(longestParsed(parses)).toBeLessThanOrEqual(SCAN_SLICE_BYTES + 2);
    // ~1.7 MiB: a turn or more each to scan the body, to find the members of "x" and to parse them.
    expect(turns).toBeGreaterThanOrEqual(3);
    parses.mockRestore();
    expect(ahead?.body).toEqual(JSON.parse(text));
  });

  it('parses large values at any depth as JSON.parse does (duplicate keys, escapes, nesting), and refuses what it refuses in its words', { timeout: 90_000 }, async () => {
    const big = 'x'.repeat(SCAN_SLICE_BYTES);
    const many = Array.from({ length: 40_000 }, (_, index) => `{"k${index % 7}":[${index},"a\\"]}{",null,true]}`).join(' , ');
    const bodies = [
      `{"model":"m","messages":[{"role":"user","content":"hi"}],"x":{"a":[1,2,{"b":"${big}"}],"a":"dup","c":{ "d" : [ ${many} ] }}, "y" : [ ]}`,
      `{"model":"m","messages":[{"role":"user","content":"hi","meta":{"list":[${many}],"s":"${big}"}}]}`,
      `{"model":"m","input":"no list here","pad":[${many}],"deep":{"e":{"f":"${big}"}}}`,
    ];
    for (const [index, text] of bodies.entries()) {
      const raw = Buffer.from(text);
      const parses = vi.spyOn(JSON, 'parse');
      const ahead = await parseAhead(raw, 'messages', { maxItems: 50_000, maxValues: 3_000_000 }, async () => undefined);
      expect(longestParsed(parses), `body ${index}`).toBeLessThanOrEqual(SCAN_SLICE_BYTES + 16);
      parses.mockRestore();
      // The third has no conversation list: the whole-body parse reads it.
      expect(ahead?.body ?? readJsonObject(raw, 'application/json'), `body ${index}`).toEqual(JSON.parse(text));
    }
    for (const text of [`{"model":"m","messages":[],"x":{"a":[${many}],"__proto__":{"p":1}}}`, `{"model":"m","messages":[],"x":[${many},]}`]) {
      const raw = Buffer.from(text);
      expect(await parseAhead(raw, 'messages', { maxItems: 50_000, maxValues: 3_000_000 }, async () => undefined)).toBeUndefined();
      expect(() => readJsonObject(raw, 'application/json')).toThrow(/forbidden key|not valid JSON/);
    }
  });
});
