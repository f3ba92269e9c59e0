import { describe, it, expect } from 'vitest';
import { ExactCounter } from '../../src/compaction/sizes/exact-count.js';
import { JsonUpstreamDouble } from '../support/json-upstream-double.js';
import { manualClock } from '../support/manual-clock.js';

const body = {
  model: 'm',
  messages: [{ role: 'user', content: 'hi' }],
  tools: [{ type: 'function', function: { name: 'bash' } }],
  chat_template_kwargs: { enable_thinking: false },
  stream: true,
  temperature: 0.3,
};

const TEN_MINUTES = 10 * 60_000;

const inputTokens = (count: number) => ({ status: 200, body: { input_tokens: count } });
const notFound = { status: 404, body: { error: { message: 'File Not Found' } } };
const applied = { status: 200, body: { prompt: '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n' } };
const tokenized = (count: number) => ({ status: 200, body: { tokens: Array.from({ length: count }, (_, index) => index) } });

describe('ExactCounter', () => {
  it('asks /v1/chat/completions/input_tokens first, with the same body, not streamed', async () => {
    const upstream = new JsonUpstreamDouble({ 'POST /v1/chat/completions/input_tokens': inputTokens(42) });
    await expect(new ExactCounter(upstream).count(body)).resolves.toBe(42);
    expect(upstream.calls).toEqual([{ method: 'POST', path: '/v1/chat/completions/input_tokens', body: { ...body, stream: false } }]);
  });

  it('falls back on a 404 to /apply-template then /tokenize with add_special: true, and counts the tokens', async () => {
    const upstream = new JsonUpstreamDouble({ 'POST /apply-template': applied, 'POST /tokenize': tokenized(17) });
    await expect(new ExactCounter(upstream).count(body)).resolves.toBe(17);
    expect(upstream.calls.map((call) => call.path)).toEqual(['/v1/chat/completions/input_tokens', '/apply-template', '/tokenize']);
    expect(upstream.calls[1]!.body).toEqual({ messages: body.messages, tools: body.tools, chat_template_kwargs: body.chat_template_kwargs });
    expect(upstream.calls[2]!.body).toEqual({ content: applied.body.prompt, add_special: true });
  });

  it('sends only what the template reads to /apply-template', async () => {
    const upstream = new JsonUpstreamDouble({ 'POST /apply-template': applied, 'POST /tokenize': tokenized(3) });
    await new ExactCounter(upstream).count({ model: 'm', messages: body.messages });
    expect(upstream.calls[1]!.body).toEqual({ messages: body.messages });
  });

  it('does not ask an unsupported endpoint again within its retry time, then asks again', async () => {
    const clock = manualClock();
    const upstream = new JsonUpstreamDouble({ 'POST /apply-template': applied, 'POST /tokenize': tokenized(5) });
    const counter = new ExactCounter(upstream, clock.now);
    await counter.count(body);
    clock.advance(TEN_MINUTES - 1);
    await expect(counter.count(body)).resolves.toBe(5);
    expect(upstream.count('POST', '/v1/chat/completions/input_tokens')).toBe(1);
    expect(upstream.count('POST', '/apply-template')).toBe(2);
    clock.advance(1);
    upstream.routes['POST /v1/chat/completions/input_tokens'] = inputTokens(6); // the server was upgraded
    await expect(counter.count(body)).resolves.toBe(6);
    expect(upstream.count('POST', '/v1/chat/completions/input_tokens')).toBe(2);
  });

  it('leaves /apply-template alone for a while too, when it is missing', async () => {
    const clock = manualClock();
    const upstream = new JsonUpstreamDouble();
    const counter = new ExactCounter(upstream, clock.now);
    await expect(counter.count(body)).resolves.toBeNull();
    await expect(counter.count(body)).resolves.toBeNull();
    expect(upstream.calls).toHaveLength(2);
    clock.advance(TEN_MINUTES);
    await counter.count(body);
    expect(upstream.calls).toHaveLength(4);
  });

  it('treats 405 and 501 as unsupported, and keeps asking after other errors', async () => {
    for (const status of [405, 501]) {
      const upstream = new JsonUpstreamDouble({ 'POST /v1/chat/completions/input_tokens': { status, body: {} }, 'POST /apply-template': applied, 'POST /tokenize': tokenized(2) });
      const counter = new ExactCounter(upstream, manualClock().now);
      await counter.count(body);
      await counter.count(body);
      expect(upstream.count('POST', '/v1/chat/completions/input_tokens')).toBe(1);
    }
    const busy = new JsonUpstreamDouble({ 'POST /v1/chat/completions/input_tokens': { status: 503, body: {} }, 'POST /apply-template': applied, 'POST /tokenize': tokenized(2) });
    const counter = new ExactCounter(busy, manualClock().now);
    await expect(counter.count(body)).resolves.toBe(2);
    await counter.count(body);
    expect(busy.count('POST', '/v1/chat/completions/input_tokens')).toBe(2);
  });

  it('is null when nothing works', async () => {
    await expect(new ExactCounter(new JsonUpstreamDouble()).count(body)).resolves.toBeNull();
    const noTokenize = new JsonUpstreamDouble({ 'POST /apply-template': applied });
    await expect(new ExactCounter(noTokenize).count(body)).resolves.toBeNull();
    const badTemplate = new JsonUpstreamDouble({ 'POST /apply-template': { status: 200, body: { prompt: 42 } }, 'POST /tokenize': tokenized(1) });
    await expect(new ExactCounter(badTemplate).count(body)).resolves.toBeNull();
    expect(badTemplate.count('POST', '/tokenize')).toBe(0);
    const badTokens = new JsonUpstreamDouble({ 'POST /apply-template': applied, 'POST /tokenize': { status: 200, body: { tokens: 'many' } } });
    await expect(new ExactCounter(badTokens).count(body)).resolves.toBeNull();
  });

  it('falls back when input_tokens answers without a number', async () => {
    const upstream = new JsonUpstreamDouble({
      'POST /v1/chat/completions/input_tokens': { status: 200, body: { input_tokens: 'ten' } },
      'POST /apply-template': applied,
      'POST /tokenize': tokenized(10),
    });
    await expect(new ExactCounter(upstream).count(body)).resolves.toBe(10);
  });

  it('turns exceptions into null (and the next way is still tried)', async () => {
    const thrown = new JsonUpstreamDouble({
      'POST /v1/chat/completions/input_tokens': new Error('socket hang up'),
      'POST /apply-template': new Error('socket hang up'),
    });
    await expect(new ExactCounter(thrown).count(body)).resolves.toBeNull();
    expect(thrown.calls.map((call) => call.path)).toEqual(['/v1/chat/completions/input_tokens', '/apply-template']);
    const recovered = new JsonUpstreamDouble({
      'POST /v1/chat/completions/input_tokens': new Error('socket hang up'),
      'POST /apply-template': applied,
      'POST /tokenize': tokenized(8),
    });
    await expect(new ExactCounter(recovered).count(body)).resolves.toBe(8);
  });

  it("passes the caller's headers to every call", async () => {
    const upstream = new JsonUpstreamDouble({ 'POST /apply-template': applied, 'POST /tokenize': tokenized(1) });
    await new ExactCounter(upstream).count(body, undefined, { authorization: 'Bearer client' });
    for (const call of upstream.calls) expect(call.headers).toEqual({ authorization: 'Bearer client' });
  });
});
