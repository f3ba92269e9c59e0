import { describe, expect, it } from 'vitest';
import { extractUsage } from '../../src/upstream/usage.js';
import { usageOfJsonText } from '../../src/upstream/usage-text.js';
import { formatAt } from '../support/formats.js';

const CHAT = formatAt('/v1/chat/completions').usage;

// Issue 26: a JSON answer is read for `usage` only, not parsed whole; whatever it finds must equal the whole parse.
const answers: Array<[string, string]> = [
  ['/v1/chat/completions', '{"id":"x","choices":[{"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":25,"completion_tokens":3,"total_tokens":28},"timings":{"cache_n":24,"prompt_n":1}}'],
  ['/v1/chat/completions', '{"choices":[{"message":{"content":"the \\"usage\\": {\\"prompt_tokens\\": 9} text, braces } { and \\\\"}}],"usage" : {"prompt_tokens":7,"prompt_tokens_details":{"cached_tokens":2}}}'],
  ['/v1/chat/completions', '{"choices":[],"timings":{"cache_n":1,"prompt_n":2}}'],
  ['/v1/messages', '{"type":"message","usage":{"input_tokens":10,"output_tokens":2}}'],
  ['/v1/responses', '{"object":"response","output":[],"usage":{"input_tokens":10,"output_tokens":2,"total_tokens":12}}'],
];

describe('usageOfJsonText', () => {
  it.each(answers)('finds what a whole parse finds on %s: %s', (url, text) => {
    const words = formatAt(url).usage;
    expect(usageOfJsonText(text, words)).toEqual(extractUsage(JSON.parse(text), words));
  });

  it('leaves the answer to a whole parse when it has neither key, or a key it cannot read whole', () => {
    expect(usageOfJsonText('{"choices":[]}', CHAT)).toBeUndefined();
    expect(usageOfJsonText('{"usage":{"prompt_tokens":1},"object":"usage"}', CHAT)).toBeUndefined();
    expect(usageOfJsonText('{"usage":{"prompt_tokens":1', CHAT)).toBeUndefined();
    expect(usageOfJsonText('not json', CHAT)).toBeUndefined();
  });
});
