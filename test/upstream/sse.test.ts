import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sseComment } from '../../src/http/exchange/sse-comment.js';
import { MAX_TAPPED_LINE_BYTES, SseTap } from '../../src/upstream/sse.js';
import { loadFixture } from '../support/fixtures.js';
import { formatAt } from '../support/formats.js';

const CHAT = formatAt('/v1/chat/completions');

function tapOf(body: Buffer, cuts: readonly number[], collectUsage = true): SseTap {
  const tap = new SseTap(CHAT, { collectUsage });
  let start = 0;
  for (const cut of [...new Set(cuts)].sort((a, b) => a - b)) {
    tap.write(body.subarray(start, cut));
    start = cut;
  }
  tap.write(body.subarray(start));
  return tap;
}

describe('SseTap', () => {
  it("reads the status of an error event: the upstream's code, else 502, and none without one", () => {
    const recorded = new SseTap(CHAT);
    recorded.write(loadFixture('chat_stream_midstream_error').body);
    expect(recorded.errorStatus).toBe(500);
    const nameless = new SseTap(CHAT);
    nameless.write(Buffer.from('data: {"choices":[]}\n\ndata: {"error":{"message":"gone","code":"boom"}}'));
    expect(nameless.errorStatus).toBe(502);
    const clean = new SseTap(CHAT);
    clean.write(loadFixture('chat_stream').body);
    expect(clean.errorStatus).toBeNull();
  });

  const stream = loadFixture('chat_stream').body;

  it('finds usage, timings and [DONE] in a recorded stream, however it is cut', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: stream.length }), { maxLength: 40 }), (cuts) => {
        const tap = tapOf(stream, cuts);
        expect(tap.sawDone).toBe(true);
        expect(tap.sawError).toBe(false);
        expect(tap.usage).toMatchObject({ prompt_tokens: 25, completion_tokens: 12, total_tokens: 37 });
        expect(tap.timings).toMatchObject({ cache_n: 24, prompt_n: 1 });
        expect(tap.closingBytes()).toBe('');
      }),
    );
  });

  it('byte by byte, through multi-byte characters', () => {
    const tap = new SseTap(CHAT, { collectUsage: true });
    for (let index = 0; index < stream.length; index++) tap.write(stream.subarray(index, index + 1));
    expect(tap.usage?.prompt_tokens).toBe(25);
    expect(tap.sawDone).toBe(true);
  });

  it('reads timings without usage, and nothing when not asked to', () => {
    const noUsage = tapOf(loadFixture('chat_stream_no_usage').body, []);
    expect(noUsage.usage).toBeUndefined();
    expect(noUsage.timings).toMatchObject({ cache_n: 24 });
    const notCollecting = tapOf(stream, [], false);
    expect(notCollecting.usage).toBeUndefined();
    expect(notCollecting.sawDone).toBe(true);
  });

  it("recognises llama-server's mid-stream error event", () => {
    const tap = tapOf(loadFixture('chat_stream_midstream_error').body, [100, 5000]);
    expect(tap.sawError).toBe(true);
    expect(tap.sawDone).toBe(false);
  });

  it('knows where the bytes stand relative to an event boundary', () => {
    const tap = new SseTap(CHAT);
    expect(tap.closingBytes()).toBe('');
    tap.write(Buffer.from('data: {"a":1}\n'));
    expect(tap.closingBytes()).toBe('\n');
    tap.write(Buffer.from('\n'));
    expect(tap.closingBytes()).toBe('');
    tap.write(Buffer.from('data: {"a'));
    expect(tap.closingBytes()).toBe('\n\n');
    const crlf = new SseTap(CHAT);
    crlf.write(Buffer.from('data: [DONE]\r\n\r\n'));
    expect(crlf.sawDone).toBe(true);
    expect(crlf.closingBytes()).toBe('');
  });

  it('holds at most MAX_TAPPED_LINE_BYTES of a line with no end, and reads on after it', () => {
    // A 1.4 GB line once took 1.5 GB of memory: the tap kept all of it, waiting for its end.
    const tap = new SseTap(CHAT, { collectUsage: true });
    const piece = Buffer.alloc(64 * 1024, 'x');
    tap.write(Buffer.from('data: {"choices":[{"delta":{"content":"'));
    for (let written = 0; written < 4 * MAX_TAPPED_LINE_BYTES; written += piece.length) {
      tap.write(piece);
      expect(tap.bufferedBytes).toBeLessThanOrEqual(MAX_TAPPED_LINE_BYTES);
    }
    // Still inside the line: an appended event must end it first.
    expect(tap.closingBytes()).toBe('\n\n');
    tap.write(Buffer.from('"}}]}\n\n'));
    expect(tap.bufferedBytes).toBe(0);
    // The lines after the long one are read as before.
    tap.write(Buffer.from('data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}\n\ndata: [DONE]\n\n'));
    expect(tap.usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 2 });
    expect(tap.sawDone).toBe(true);
    expect(tap.closingBytes()).toBe('');
  });

  it('a long line that ends in a CR is still one line', () => {
    const tap = new SseTap(CHAT);
    tap.write(Buffer.alloc(MAX_TAPPED_LINE_BYTES + 10, 'x'));
    tap.write(Buffer.from('\r'));
    tap.write(Buffer.from('\ndata: [DONE]\r\n\r\n'));
    expect(tap.sawDone).toBe(true);
    expect(tap.closingBytes()).toBe('');
  });

  it('sseComment keeps a comment on one line', () => {
    expect(sseComment('compacting 84 messages\n(chunk 2/3)')).toBe(': compacting 84 messages (chunk 2/3)\n\n');
  });
});
