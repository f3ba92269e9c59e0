import { describe, expect, it } from 'vitest';
import { withoutMember } from '../../src/formats/splice.js';

/**
 * A field only compactor reads (Anthropic's `context_management`, issue 38)
 * taken out of the client's bytes, every other byte as it was: a number
 * JSON.parse would round must survive.
 */

const out = (body: string): string => withoutMember(Buffer.from(body), 'context_management').toString();

describe('withoutMember', () => {
  it('takes the member and its comma out, wherever it stands, and leaves every other byte', () => {
    expect(out('{"seed":18446744073709551615, "context_management":{"edits":[]}, "messages":[]}')).toBe('{"seed":18446744073709551615, "messages":[]}');
    expect(out('{"messages":[],"context_management":{"edits":[{"type":"x"}]}}')).toBe('{"messages":[]}');
    expect(out('{ "messages": [] ,\n  "context_management" : null\n}')).toBe('{ "messages": [] \n}');
    expect(out('{"context_management":{}}')).toBe('{}');
  });

  it('takes every member of that name (JSON.parse kept the last; an earlier one must not come back), and nothing nested', () => {
    expect(out('{"context_management":1,"a":{"context_management":2},"context_management":3}')).toBe('{"a":{"context_management":2}}');
    const body = '{"model":"m","messages":[{"role":"user","content":"context_management"}]}';
    expect(withoutMember(Buffer.from(body), 'context_management')).toEqual(Buffer.from(body));
  });
});
