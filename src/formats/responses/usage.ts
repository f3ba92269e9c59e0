import type { UsageWords } from '../../upstream/usage.js';
import { usageCounted } from '../usage-counts.js';

/**
 * A Responses answer's `usage` (https://platform.openai.com/docs/api-reference/responses/object):
 * `input_tokens` is the prompt, `output_tokens` the answer. A stream's
 * `response.completed` holds it in `response`.
 */
export const RESPONSES_USAGE: UsageWords = {
  key: 'usage',
  within: ['response'],
  read: (value) => usageCounted(value, ['input_tokens'], 'output_tokens'),
};
