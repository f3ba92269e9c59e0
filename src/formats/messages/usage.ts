import type { UsageWords } from '../../upstream/usage.js';
import { usageCounted } from '../usage-counts.js';

/**
 * A Messages answer's `usage` (https://docs.anthropic.com/en/api/messages):
 * `input_tokens` plus the cache reads and writes, which Anthropic counts
 * apart from it, is the prompt; `output_tokens` the answer. A stream's
 * `message_start` holds it in `message`, its `message_delta` at the top.
 */
export const MESSAGES_USAGE: UsageWords = {
  key: 'usage',
  within: ['message'],
  read: (value) => usageCounted(value, ['input_tokens', 'cache_read_input_tokens', 'cache_creation_input_tokens'], 'output_tokens'),
};
