import { describe, expect, it } from 'vitest';
import { isContextExceeded } from '../../src/upstream/refusal.js';
import { loadFixture } from '../support/fixtures.js';

describe('isContextExceeded', () => {
  it("recognizes llama-server's recorded refusal and OpenAI's code (the @example)", () => {
    expect(isContextExceeded(JSON.parse(loadFixture('ctx_exceeded_chat').body.toString('utf8')))).toBe(true);
    expect(isContextExceeded({ error: { code: 400, type: 'exceed_context_size_error', n_ctx: 2048 } })).toBe(true);
    expect(isContextExceeded({ error: { code: 'context_length_exceeded' } })).toBe(true);
  });

  it('says no to every other error and to what is not an error', () => {
    expect(isContextExceeded({ error: { type: 'invalid_request_error' } })).toBe(false);
    expect(isContextExceeded(JSON.parse(loadFixture('missing_messages').body.toString('utf8')))).toBe(false);
    for (const other of [undefined, null, 'exceed_context_size_error', [], { error: 'context_length_exceeded' }, { error: null }]) {
      expect(isContextExceeded(other)).toBe(false);
    }
  });
});
