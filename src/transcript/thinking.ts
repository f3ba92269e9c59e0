import type { ChatMessage } from './message.js';
import { estimateTokens } from './tokens.js';

/**
 * Anthropic's `clear_thinking_20251015`: the thinking of all but the last
 * `keep` assistant turns that have any is cleared (in the chat view, an
 * assistant message's `reasoning_content`; the Messages write-back then
 * leaves out its thinking blocks). Pure: a cleared message is a new object,
 * the rest returned as they were. No marker is written: a thinking block has
 * no text the model is shown as its own words, and Anthropic writes none.
 */

export interface ClearedThinking {
  readonly messages: readonly ChatMessage[];
  /** Assistant turns whose thinking was cleared. */
  readonly turns: number;
  /** The bytes/4 estimate of the thinking cleared. */
  readonly tokens: number;
}

function thinkingOf(message: ChatMessage): string | undefined {
  const thinking = message['reasoning_content'];
  return message.role === 'assistant' && typeof thinking === 'string' && thinking !== '' ? thinking : undefined;
}

export function clearThinking(messages: readonly ChatMessage[], keep: number | 'all'): ClearedThinking {
  if (keep === 'all') return { messages, turns: 0, tokens: 0 };
  const thinking = messages.flatMap((message, index) => (thinkingOf(message) === undefined ? [] : [index]));
  const cleared = thinking.slice(0, Math.max(0, thinking.length - keep));
  if (cleared.length === 0) return { messages, turns: 0, tokens: 0 };
  const out = messages.slice();
  let tokens = 0;
  for (const index of cleared) {
    const { reasoning_content: dropped, ...rest } = messages[index]!;
    tokens += estimateTokens(String(dropped));
    out[index] = rest as ChatMessage;
  }
  return { messages: out, turns: cleared.length, tokens };
}
