import { describe, expect, it } from 'vitest';
import { SseTap } from '../../src/upstream/sse.js';
import { extractUsage } from '../../src/upstream/usage.js';
import { formatAt } from '../support/formats.js';

/** issue 16: the tap reads the Messages and Responses streams too: how they end, their errors, their usage. */

/** The tap as the route of `url` makes it: with its format's stream end and usage words. */
function tapped(text: string, url = text.includes('"response.') ? '/v1/responses' : '/v1/messages'): SseTap {
  const tap = new SseTap(formatAt(url), { collectUsage: true });
  tap.write(Buffer.from(text));
  return tap;
}

describe('issue 16: the SSE tap on Messages and Responses streams', () => {
  it('item 1: a Messages stream ends properly with message_stop, and its usage is read from message_start and message_delta', () => {
    const start = 'event: message_start\ndata: {"type":"message_start","message":{"id":"m","usage":{"input_tokens":120,"cache_read_input_tokens":30,"output_tokens":1}}}\n\n';
    const tap = tapped(start);
    expect(tap.sawDone).toBe(false);
    expect(tap.usage).toEqual({ prompt_tokens: 150, completion_tokens: 1 });
    tap.write(Buffer.from('event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":151,"output_tokens":9}}\n\n'));
    expect(tap.usage).toEqual({ prompt_tokens: 151, completion_tokens: 9 });
    tap.write(Buffer.from('event: message_stop\ndata: {"type":"message_stop"}\n\n'));
    expect(tap.sawDone).toBe(true);
  });

  it('item 1: a message_delta without input_tokens keeps the prompt size message_start gave', () => {
    const tap = tapped('data: {"type":"message_start","message":{"usage":{"input_tokens":120,"output_tokens":1}}}\n\ndata: {"type":"message_delta","usage":{"output_tokens":9}}\n\n');
    expect(tap.usage?.prompt_tokens).toBe(120);
  });

  it("item 1: Anthropic's error event counts as the stream's error", () => {
    const tap = tapped('event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"busy"}}\n\n');
    expect(tap.sawError).toBe(true);
    expect(tap.errorStatus).toBe(502);
  });

  it('item 2: a Responses stream ends properly with response.completed, its type written last, and its usage is read', () => {
    const tap = tapped('event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"x"}\n\n');
    expect(tap.sawDone).toBe(false);
    tap.write(Buffer.from('event: response.completed\ndata: {"response":{"id":"r","usage":{"input_tokens":80,"output_tokens":4}},"type":"response.completed"}\n\n'));
    expect(tap.sawDone).toBe(true);
    expect(tap.usage).toEqual({ prompt_tokens: 80, completion_tokens: 4 });
  });

  it('item 2: extractUsage keeps chat usage as it was', () => {
    expect(extractUsage({ usage: { prompt_tokens: 5, completion_tokens: 1 } }, formatAt('/v1/chat/completions').usage).usage).toEqual({ prompt_tokens: 5, completion_tokens: 1 });
  });
});
