import { type UsageWords, isUsage } from '../../upstream/usage.js';

/** A chat completion says what it cost in `usage`, already in the words compactor reads (OpenAI's `prompt_tokens` …): taken as it came. */
export const CHAT_USAGE: UsageWords = {
  key: 'usage',
  within: [],
  read: (value) => (isUsage(value) ? value : undefined),
};
