import { describe, expect, it } from 'vitest';
import { PARSE_AHEAD_BYTES, WIRE_FORMATS } from '../../../src/formats/registry.js';
import { type ReadSettings, readExchange } from '../../../src/http/exchange/read-request.js';

const settings: ReadSettings = { format: WIRE_FORMATS[0]!, pairs: 'repair', observing: false, maxItems: 50_000, maxValues: 3_000_000 };

function chatBytes(messages: number, padding = 0): Buffer {
  const list = Array.from({ length: messages }, (_, index) => ({ role: index % 2 === 0 ? 'user' : 'assistant', content: `message ${index} ${'x'.repeat(padding)}` }));
  return Buffer.from(JSON.stringify({ model: 'm', messages: list }));
}

describe('readExchange', () => {
  it('reads an ordinary body at once: a value, not a promise to await (issue 40: an await costs every request a microtask turn)', () => {
    const read = readExchange(settings, chatBytes(13), 'application/json');
    expect(read).not.toBeInstanceOf(Promise);
    expect((read as Awaited<typeof read>).request.pairs.body.messages).toHaveLength(13);
  });

  it('reads a large body in slices: a promise, the event loop turning between them', async () => {
    const raw = chatBytes(64, PARSE_AHEAD_BYTES / 32);
    expect(raw.length).toBeGreaterThanOrEqual(PARSE_AHEAD_BYTES);
    const read = readExchange(settings, raw, 'application/json');
    expect(read).toBeInstanceOf(Promise);
    expect((await read).request.pairs.body.messages).toHaveLength(64);
  });

  it('refuses an ordinary body that is not JSON as it did when the read was awaited', async () => {
    await expect(async () => readExchange(settings, Buffer.from('{"model":'), 'application/json')).rejects.toThrow();
  });
});
