import { describe, expect, it } from 'vitest';
import { FakeUpstream } from '../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';

/**
 * issue 24: one conversation with an output limit of 32,000 keeps the same
 * room for its answer whichever API it comes through: chat completions
 * (`max_tokens`, `max_completion_tokens`), Messages (`max_tokens`) and
 * Responses (`max_output_tokens`). The history is larger than the whole
 * window, so each route refuses it, and the refusal names the reservation.
 */

const opened = closedAfterEachTest();
const WINDOW = 32_768;
const LIMIT = 32_000;
const TEXT = 'word '.repeat(40_000);

async function refusal(url: string, body: Record<string, unknown>): Promise<{ status: number; message: string }> {
  const upstream = opened(await FakeUpstream.start());
  const proxy = opened(await startProxy(upstream, { config: { compaction: { enabled: true }, models: { '*': { context_window: WINDOW } } } }));
  const response = await proxy.app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) });
  const json = response.json() as { error: { message: string } };
  return { status: response.statusCode, message: json.error.message };
}

const reserved = (message: string): number => Number(/(\d+) reserved for the answer/.exec(message)?.[1]);

describe('issue 24: the same budget through every route', () => {
  it('reserves a quarter of the window for an output limit of 32,000 through all three APIs', async () => {
    const chat = await refusal('/v1/chat/completions', { model: 'm', max_tokens: LIMIT, messages: [{ role: 'user', content: TEXT }] });
    const newer = await refusal('/v1/chat/completions', { model: 'm', max_completion_tokens: LIMIT, messages: [{ role: 'user', content: TEXT }] });
    const messages = await refusal('/v1/messages', { model: 'm', max_tokens: LIMIT, messages: [{ role: 'user', content: TEXT }] });
    const responses = await refusal('/v1/responses', { model: 'm', max_output_tokens: LIMIT, input: TEXT });
    for (const answer of [chat, newer, messages, responses]) expect(answer.status).toBe(400);
    expect([chat, newer, messages, responses].map((answer) => reserved(answer.message))).toEqual([8_192, 8_192, 8_192, 8_192]);
    expect(messages.message).toContain("the request's max_tokens of 32000");
    expect(responses.message).toContain("the request's max_output_tokens of 32000");
    expect(responses.message).toMatch(/lower max_output_tokens/);
  });
});
