import { describe, expect, it } from 'vitest';
import { slotCountOf } from '../../src/slots/discovery.js';
import { loadFixture } from '../support/fixtures.js';

describe('slotCountOf', () => {
  it("reads total_slots from llama-server's /props (the recorded answer)", () => {
    const props: unknown = JSON.parse(loadFixture('props.json').body.toString());
    expect(slotCountOf(props, undefined)).toBe(1);
  });

  it('falls back to the length of /slots, and is null for a server that reports none', () => {
    const slots: unknown = JSON.parse('[{"id":0,"n_ctx":2048,"speculative":false,"is_processing":false},{"id":1}]');
    expect(slotCountOf({ default_generation_settings: {} }, slots)).toBe(2);
    expect(slotCountOf({ object: 'list' }, undefined)).toBeNull();
    expect(slotCountOf({ total_slots: 0 }, undefined)).toBeNull();
    expect(slotCountOf(undefined, { error: 'not found' })).toBeNull();
  });
});
