import { describe, expect, it } from 'vitest';
import { carriesIdSlot, withIdSlot } from '../../src/slots/id-slot.js';

describe('withIdSlot', () => {
  it('puts id_slot first in the object and keeps every other byte of the client as it was', () => {
    const raw = Buffer.from(' {"seed":18446744073709551615,  "messages":[{"role":"user","content":"h\\u00e9"}]}\n');
    const out = withIdSlot(raw, 3);
    expect(out.toString()).toBe(' {"id_slot":3,"seed":18446744073709551615,  "messages":[{"role":"user","content":"h\\u00e9"}]}\n');
    expect(JSON.parse(out.toString()).id_slot).toBe(3);
  });

  it('writes an empty object as one holding only id_slot', () => {
    expect(withIdSlot(Buffer.from('{ }'), 0).toString()).toBe('{"id_slot":0 }');
  });
});

describe('carriesIdSlot', () => {
  it('is true for a body that names its own slot, -1 included, and false otherwise', () => {
    expect(carriesIdSlot({ id_slot: 2 })).toBe(true);
    expect(carriesIdSlot({ id_slot: -1 })).toBe(true);
    expect(carriesIdSlot({ messages: [] })).toBe(false);
  });
});
