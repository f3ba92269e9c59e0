import { describe, expect, it } from 'vitest';
import type { ChatContext } from '../../src/http/exchange/planner.js';
import type { PromptTokens } from '../../src/http/ops/metrics.js';
import { promptTokensOf, withPromptTokens } from '../../src/http/exchange/prompt-tokens.js';
import { estimateRequestTokens } from '../../src/transcript/tokens.js';
import { readFiguresOf, requestFiguresOf } from '../../src/http/exchange/request-figures.js';

const body = { model: 'm', messages: [{ role: 'user', content: 'x'.repeat(4000) }, { role: 'user', content: 'hi' }] } as ChatContext['body'];
const context = { body, tenant: 't', headers: {}, pairRepairs: [] } as unknown as ChatContext;
// The figures taken when the request is forwarded: as sent, and with a shorter history.
const request = requestFiguresOf(readFiguresOf(context), context, body, undefined);

describe('promptTokensOf', () => {
  it('takes usage.prompt_tokens and timings.cache_n (the @example)', () => {
    expect(promptTokensOf({ request, usage: { prompt_tokens: 25 }, timings: { cache_n: 24, prompt_n: 1 } })).toEqual({ model: 'm', sent: 25, forwarded: 25, cached: 24 });
  });

  it("falls back to llama-server's timings for the count, and to OpenAI's cached_tokens for the cache", () => {
    expect(promptTokensOf({ request, usage: undefined, timings: { cache_n: 30, prompt_n: 10 } })).toEqual({ model: 'm', sent: 40, forwarded: 40, cached: 30 });
    expect(promptTokensOf({ request, usage: { prompt_tokens: 50, prompt_tokens_details: { cached_tokens: 20 } }, timings: undefined })).toEqual({
      model: 'm',
      sent: 50,
      forwarded: 50,
      cached: 20,
    });
    expect(promptTokensOf({ request, usage: undefined, timings: undefined })).toBeNull();
  });

  it('scales the count to what the client sent by the estimates of the two prompts when the prompt was changed', () => {
    const forwarded = { ...body, messages: [{ role: 'user', content: 'hi' }] };
    const ratio = estimateRequestTokens({ messages: body.messages }) / estimateRequestTokens({ messages: forwarded.messages });
    const tokens = promptTokensOf({ request: requestFiguresOf(readFiguresOf(context), context, forwarded, undefined), usage: { prompt_tokens: 10 }, timings: undefined });
    expect(tokens).toEqual({ model: 'm', sent: Math.round(10 * ratio), forwarded: 10, cached: 0 });
    expect(tokens!.sent).toBeGreaterThan(100);
  });
});

describe('withPromptTokens', () => {
  // Issue 26: the metrics and the dashboard read the same figures; the estimates behind them (the tools' JSON.stringify) are made once.
  it('estimates once per answered request and hands the metrics and the next reader the same figures', () => {
    let toolReads = 0;
    const changedBody = {
      ...body,
      get tools() {
        toolReads++;
        return [{ type: 'function', function: { name: 'bash' } }];
      },
    } as unknown as ChatContext['body'];
    const forwarded = { ...body, messages: [{ role: 'user', content: 'hi' }] };
    const counted: PromptTokens[] = [];
    const seen: (PromptTokens | null)[] = [];
    const hook = withPromptTokens(undefined, { promptTokens: (tokens) => counted.push(tokens) }, (_observation, tokens) => seen.push(tokens));
    const changedContext = { ...context, body: changedBody } as ChatContext;
    const request = requestFiguresOf(readFiguresOf(changedContext), changedContext, forwarded, undefined);
    hook({ request, forwardedBytes: 0, report: undefined, status: 200, streamed: false, usage: { prompt_tokens: 10 }, timings: undefined });
    expect(toolReads).toBe(1);
    expect(seen).toEqual(counted);
    expect(seen[0]).toBe(counted[0]);
  });
});
