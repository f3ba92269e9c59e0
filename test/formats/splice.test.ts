import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { findMessagesSpan, spliceMessages } from '../../src/formats/splice.js';
import { propertyParameters } from '../transcript/arbitraries.js';

const rewritten = [{ role: 'user', content: 'short' }];
const rewrittenText = JSON.stringify(rewritten);

/** `raw` with its top-level messages value (which must be `original`, last occurrence) replaced by the rewritten one. */
function expected(raw: string, original: string): string {
  const at = raw.lastIndexOf(original);
  return raw.slice(0, at) + rewrittenText + raw.slice(at + original.length);
}

describe('spliceMessages', () => {
  const messages = '[{"role":"user","content":"hi"}]';
  const cases: Array<{ name: string; raw: string; original?: string }> = [
    { name: 'big integers', raw: `{"model":"m","seed":18446744073709551615,"messages":${messages},"n":-9007199254740993}` },
    { name: 'numbers JSON.parse cannot hold (-1e400, 1e999) and exponents', raw: `{"model":"m","a":-1e400,"messages":${messages},"b":1e999,"c":1.0E+2,"d":-0}` },
    { name: 'unicode escapes and escaped quotes in other fields', raw: `{"model":"\\u006d\\ud83d\\ude00","stop":["\\"]","\\\\"],"messages":${messages},"user":"caf\\u00e9 \\"x\\" é"}` },
    { name: 'key order and whitespace', raw: `\r\n {\n\t"stream" : true ,\n  "messages"\t:\t${messages}  ,\r\n "model":"m"\n}\n` },
    { name: 'a duplicate key: the last one wins, as in JSON.parse', raw: `{"messages":[{"role":"user","content":"first"}],"model":"m","messages":${messages}}` },
    { name: 'a duplicate key written with escapes', raw: `{"messages":${messages},"model":"m","m\\u0065ssages":[{"role":"user","content":"last"}]}`, original: '[{"role":"user","content":"last"}]' },
    {
      name: '"messages" keys inside other fields do not count',
      raw: `{"metadata":{"messages":[1,2]},"tools":[{"function":{"parameters":{"messages":{"type":"array"}}}}],"messages":${messages},"x":"\\"messages\\":[]","y":["messages",{"messages":null}]}`,
    },
    { name: 'brackets and braces inside strings', raw: `{"a":"}]{[","messages":[{"role":"user","content":"]}\\\\"}],"b":"\\\\"}`, original: '[{"role":"user","content":"]}\\\\"}]' },
  ];
  for (const { name, raw, original = messages } of cases) {
    it(`forwards every other byte as it came: ${name}`, () => {
      const spliced = spliceMessages(Buffer.from(raw), rewritten).toString();
      expect(spliced).toBe(expected(raw, original));
      expect(JSON.parse(spliced)).toEqual({ ...(JSON.parse(raw) as object), messages: rewritten });
    });
  }

  it('finds nothing where there is no top-level messages', () => {
    expect(findMessagesSpan(Buffer.from('{"a":{"messages":[]}}'))).toBeUndefined();
    expect(findMessagesSpan(Buffer.from('[{"messages":[]}]'))).toBeUndefined();
    expect(() => spliceMessages(Buffer.from('{}'), rewritten)).toThrow(/no top-level "messages"/);
  });

  it('@example', () => {
    expect(findMessagesSpan(Buffer.from('{"model":"m","messages":[1]}'))).toEqual({ start: 24, end: 27 });
    expect(spliceMessages(Buffer.from('{"seed":18446744073709551615, "messages":[]}'), [{ role: 'user', content: 'hi' }]).toString()).toBe(
      '{"seed":18446744073709551615, "messages":[{"role":"user","content":"hi"}]}',
    );
  });

  // Random bodies, written as a client might: any spacing, keys escaped or not, numbers JSON.parse rounds,
  // "messages" keys nested anywhere and repeated at the top. The one value to replace is known from how the body was built.
  const whitespace = fc.constantFrom('', ' ', '\n', '\r\n', '\t', '  \n  ');
  const oddNumber = fc.constantFrom('18446744073709551615', '-1e400', '1e999', '0.1e-7', '-0', '123456789012345678901234567890');
  const nested = fc.letrec((tie) => ({
    value: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      fc.jsonValue({ maxDepth: 1 }),
      fc.dictionary(fc.constantFrom('messages', 'm\u0065ssages', 'role', '"', '\\'), tie('value'), { maxKeys: 3 }),
      fc.array(tie('value'), { maxLength: 3 }),
    ),
  })).value;
  const valueText = fc.oneof(
    oddNumber,
    fc.tuple(nested, fc.constantFrom(undefined, 0, 2, '\t')).map(([value, indent]) => JSON.stringify(value, null, indent) ?? 'null'),
  );
  const keyText = fc.oneof(
    fc.string({ maxLength: 8 }).map((key) => JSON.stringify(key)),
    fc.constantFrom('"messages"', '"m\\u0065ssages"', '"\\u006d\\u0065\\u0073\\u0073\\u0061\\u0067\\u0065\\u0073"', '"messages "', '"Messages"'),
  );
  const body = fc
    .record({
      entries: fc.array(fc.tuple(keyText, valueText, whitespace, whitespace), { maxLength: 6 }),
      messages: fc.tuple(fc.array(nested, { maxLength: 3 }).map((value) => JSON.stringify(value)), whitespace, whitespace),
      at: fc.nat(),
      edges: fc.tuple(whitespace, whitespace),
    })
    .map(({ entries, messages, at, edges }) => {
      const all = [...entries];
      all.splice(at % (entries.length + 1), 0, ['"messages"', ...messages]);
      const texts = all.map(([key, value, before, after]) => `${key}${before}:${after}${value}`);
      // The value JSON.parse keeps is the last one whose key says "messages".
      let last = -1;
      all.forEach(([key], index) => {
        if (JSON.parse(key) === 'messages') last = index;
      });
      const head = `${edges[0]}{${edges[1]}`;
      let offset = head.length;
      for (let index = 0; index < last; index++) offset += texts[index]!.length + 1;
      const [key, value, before, after] = all[last]!;
      const start = offset + `${key}${before}:${after}`.length;
      const raw = `${head}${texts.join(',')}}${edges[0]}`;
      return { raw, start: Buffer.byteLength(raw.slice(0, start)), end: Buffer.byteLength(raw.slice(0, start + value.length)) };
    });

  it('property: only the messages value changes, and the result parses as JSON.parse(original) with messages replaced', () => {
    fc.assert(
      fc.property(body, ({ raw, start, end }) => {
        const bytes = Buffer.from(raw);
        const spliced = spliceMessages(bytes, rewritten);
        expect(findMessagesSpan(bytes)).toEqual({ start, end });
        expect(spliced.subarray(0, start).equals(bytes.subarray(0, start))).toBe(true);
        expect(spliced.subarray(start + rewrittenText.length).equals(bytes.subarray(end))).toBe(true);
        expect(JSON.parse(spliced.toString())).toEqual({ ...(JSON.parse(raw) as object), messages: rewritten });
      }),
      propertyParameters,
    );
  });
});
