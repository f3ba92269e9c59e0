import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { propertyParameters } from '../transcript/arbitraries.js';
import { loadFixture } from './fixtures.js';
import { parseSse, sseData } from './sse.js';

/** The parser every test reads SSE with: if it is wrong, they all are. */
describe('parseSse', () => {
  it('reads comments, data fields, [DONE] and the raw bytes of each event', () => {
    const events = parseSse(': compacting\n\ndata: {"a":1}\n\ndata: [DONE]\n\n');
    expect(events.map((event) => event.raw)).toEqual([': compacting\n\n', 'data: {"a":1}\n\n', 'data: [DONE]\n\n']);
    expect(events.map((event) => event.comments)).toEqual([[' compacting'], [], []]);
    expect(events.map((event) => event.data)).toEqual([undefined, '{"a":1}', '[DONE]']);
    expect(events.map((event) => event.done)).toEqual([false, false, true]);
  });

  it('follows the grammar: CRLF, CR and LF; one space dropped after the colon; data lines joined; other fields ignored; a BOM ignored', () => {
    const body = '\uFEFFevent: x\r\ndata:a\rdata:  b\ndata\nid: 7\r\n\r\n: only a comment\n\n';
    expect(parseSse(body).map((event) => event.dataFields)).toEqual([['a', ' b', ''], []]);
    expect(sseData(body)).toEqual(['a\n b\n']);
  });

  it('drops an event the body did not end, unless asked to dispatch it', () => {
    expect(sseData('data: 1\n\ndata: 2')).toEqual(['1']);
    expect(sseData('data: 1\n\ndata: 2', { dispatchAtEnd: true })).toEqual(['1', '2']);
    expect(sseData('data: 1\n\ndata: 2\n', { dispatchAtEnd: true })).toEqual(['1', '2']);
  });

  it("splits llama-server's recorded streams event by event, as they were written", () => {
    for (const name of ['chat_stream', 'chat_stream_no_usage', 'chat_stream_midstream_error']) {
      const text = loadFixture(name).body.toString();
      const events = parseSse(text);
      expect(events.map((event) => event.raw)).toEqual(text.split(/(?<=\n\n)/));
      expect(events.every((event) => event.lines.length === 1 && event.data !== undefined)).toBe(true);
    }
  });

  it('property: the raw events joined give back the body', () => {
    const piece = fc.constantFrom('data: x', 'data:{"a":1}', ': note', 'event: e', '\n', '\r', '\r\n', '\uFEFF', 'y');
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 30 }).map((pieces) => pieces.join('')), (body) => {
        const events = parseSse(body, { dispatchAtEnd: true });
        // A body of nothing but line ends (and a BOM) has no event to hold them.
        if (events.length === 0) expect(body).toMatch(/^\uFEFF?[\r\n]*$/);
        else expect(events.map((event) => event.raw).join('')).toBe(body);
      }),
      propertyParameters,
    );
  });
});
