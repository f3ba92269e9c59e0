import { describe, it, expect } from 'vitest';
import { InvalidRequestError } from '../../../src/errors.js';
import { runNow } from '../../../src/transcript/slices.js';
import { formatAt, readInput } from '../../support/formats.js';

const FORBIDDEN = 'the request body uses a forbidden key ("__proto__" or "constructor.prototype")';

/** The error the chat completions read throws for a body, or undefined when it accepts it. */
function refusal(text: string): { code: string; message: string } | undefined {
  try {
    runNow(formatAt('/v1/chat/completions').read(readInput(Buffer.from(text), 'off')));
    return undefined;
  } catch (error) {
    if (!(error instanceof InvalidRequestError)) throw error;
    return { code: error.code, message: error.message };
  }
}

describe('the chat completions read: keys that pollute prototypes', () => {
  const message = '{"role":"user","content":"x"}';
  const polluting: Array<[string, string]> = [
    ['__proto__ at the top', `{"model":"m","__proto__":{"admin":true},"messages":[${message}]}`],
    ['an escaped __proto__', `{"model":"m","\\u005f_proto__":{"a":1},"messages":[${message}]}`],
    ['__proto__ deep in a content part', `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x","meta":{"a":{"__proto__":{"p":1}}}}]}]}`],
    ['constructor.prototype in a list', `{"model":"m","messages":[{"role":"user","content":"x","x":[{"constructor":{"prototype":{"p":1}}}]}]}`],
    ['__proto__ in a top-level array', '[{"__proto__":{}}]'],
  ];
  for (const [name, text] of polluting) {
    it(`${name}: 400 invalid_body naming the forbidden key`, () => {
      expect(refusal(text)).toEqual({ code: 'invalid_body', message: FORBIDDEN });
      expect(({} as Record<string, unknown>)['admin']).toBeUndefined();
    });
  }

  it('accepts a constructor key without a prototype, and the words inside a string', () => {
    expect(refusal(`{"model":"m","constructor":{"name":"x"},"messages":[${message}]}`)).toBeUndefined();
    expect(refusal(`{"model":"m","messages":[{"role":"user","content":"what does {\\"__proto__\\": 1} do?"}]}`)).toBeUndefined();
  });

  it('refuses a leading byte order mark and invalid JSON as invalid_json, without quoting the body', () => {
    const invalid = { code: 'invalid_json', message: 'the request body is not valid JSON' };
    expect(refusal(`\uFEFF{"model":"m","messages":[${message}]}`)).toEqual(invalid);
    expect(refusal('{"model": "secret text", "messages": [')).toEqual(invalid);
  });
});
