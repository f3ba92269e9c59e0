import { describe, expect, it } from 'vitest';
import { extractUsage } from '../../src/upstream/usage.js';
import { usageOfJsonText } from '../../src/upstream/usage-text.js';

// Issue 26: a JSON answer is read for `usage` only, not parsed whole; whatever it finds must equal the whole parse.
const answers = [
  '{"id":"x","choices":[{"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":25,"completion_tokens":3,"total_tokens":28},"timings":{"cache_n":24,"prompt_n":1}}',
  '{"choices":[{"message":{"content":"the \\"usage\\": {\\"prompt_tokens\\": 9} text, braces } { and \\\\"}}],"usage" : {"prompt_tokens":7,"prompt_tokens_details":{"cached_tokens":2}}}',
  '{"choices":[],"timings":{"cache_n":1,"prompt_n":2}}',
  '{"type":"message","usage":{"input_tokens":10,"output_tokens":2}}',
];

describe('usageOfJsonText', () => {
  it.each(answers)('finds what a whole parse finds: %s', (text) => {
    expect(usageOfJsonText(text)).toEqual(extractUsage(JSON.parse(text)));
  });

  it('leaves the answer to a whole parse when it has neither key, or a key it cannot read whole', () => {
    expect(usageOfJsonText('{"choices":[]}')).toBeUndefined();
    expect(usageOfJsonText('{"usage":{"prompt_tokens":1},"object":"usage"}')).toBeUndefined();
    expect(usageOfJsonText('{"usage":{"prompt_tokens":1')).toBeUndefined();
    expect(usageOfJsonText('not json')).toBeUndefined();
  });
});
