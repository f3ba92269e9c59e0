import { describe, expect, it } from 'vitest';
import { ContextLengthExceededError } from '../../src/errors.js';
import type { ChatMessage } from '../../src/transcript/message.js';
import { compactorWith } from '../support/compaction.js';
import { chatRequestView } from '../../src/formats/chat/read.js';

/**
 * A client's `max_tokens` is a ceiling, not a promise to fill it: agents send
 * 8,000 (qwen-code 0.15), 32,000 (qwen-code 0.24) or 8,192 (opencode) whatever
 * the window, and llama-server stops the answer at the window. compactor
 * reserves `reserve_output_tokens`, or the request's number when larger, but
 * never more than a quarter of the window.
 */

const system: ChatMessage = { role: 'system', content: 'You are a coding agent.' };

/** A prompt of about `tokens` tokens by the bytes/4 estimate. */
function promptOf(tokens: number): ChatMessage[] {
  return [system, { role: 'user', content: 'a'.repeat(tokens * 4) }];
}

async function prepared(window: number, messages: ChatMessage[], extra: Record<string, unknown>, models: Record<string, unknown> = {}) {
  const { compactor, summarizer } = compactorWith({ models: { '*': { context_window: window, ...models } } });
  const result = await compactor
    .compact({ request: chatRequestView({ model: 'm', messages, ...extra }), tenant: '', signal: new AbortController().signal })
    .catch((error: unknown) => error);
  return { result, summarizer };
}

async function refusal(window: number, extra: Record<string, unknown>, models: Record<string, unknown> = {}): Promise<ContextLengthExceededError> {
  const { result } = await prepared(window, promptOf(window), extra, models);
  expect(result).toBeInstanceOf(ContextLengthExceededError);
  return result as ContextLengthExceededError;
}

describe('the room reserved for the answer', () => {
  it('forwards a 9k-token prompt with max_tokens 32000 on a 32k window, unchanged', async () => {
    const messages = promptOf(9_000);
    const { result, summarizer } = await prepared(32_768, messages, { max_tokens: 32_000, stream: true });
    expect(result).not.toBeInstanceOf(Error);
    expect((result as { messages: unknown }).messages).toBe(messages);
    expect(summarizer.calls).toBe(0);
  });

  it('reserves the request max_tokens when larger than reserve_output_tokens, capped at a quarter of the window', async () => {
    const error = await refusal(8_192, { max_tokens: 32_000 });
    expect(error.reservedTokens).toBe(2_048);
    expect(error.message).toContain("2048 reserved for the answer (the request's max_tokens of 32000, capped at a quarter of the window)");
  });

  it('reserves the request max_completion_tokens under the quarter as it came, and names it', async () => {
    const error = await refusal(8_192, { max_completion_tokens: 1_500 });
    expect(error.reservedTokens).toBe(1_500);
    expect(error.message).toContain("1500 reserved for the answer (the request's max_completion_tokens)");
    expect(error.message).toMatch(/lower max_completion_tokens/);
  });

  it('keeps reserve_output_tokens when the request asks for less, and never advises lowering a max_tokens the client did not send', async () => {
    const error = await refusal(8_192, {});
    expect(error.reservedTokens).toBe(1_024);
    expect(error.message).toContain('1024 reserved for the answer (reserve_output_tokens)');
    expect(error.message).not.toMatch(/lower max_tokens/i);

    const smaller = await refusal(8_192, { max_tokens: 100 });
    expect(smaller.reservedTokens).toBe(1_024);
    expect(smaller.message).toContain('(reserve_output_tokens)');
    expect(smaller.message).not.toMatch(/lower max_tokens/i);
  });

  it('caps a configured reserve_output_tokens at the quarter too, and says so (a 2k slot would keep half for the answer)', async () => {
    const error = await refusal(8_192, { max_tokens: 32_000 }, { reserve_output_tokens: 3_000 });
    expect(error.reservedTokens).toBe(2_048);
    expect(error.message).toContain("(the request's max_tokens of 32000, capped at a quarter of the window)");
    const configured = await refusal(8_192, {}, { reserve_output_tokens: 3_000 });
    expect(configured.reservedTokens).toBe(2_048);
    expect(configured.message).toContain('(reserve_output_tokens of 3000, capped at a quarter of the window)');
  });
});
