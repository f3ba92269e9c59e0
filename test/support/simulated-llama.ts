import { contentText, type ChatMessage } from '../../src/transcript/message.js';
import { chatCompletionBody, chatStreamEvents, type FakeExchange, type FakeReply, type FakeUpstream, replies } from './fake-upstream.js';
import { FACT_PATTERN } from './conversation.js';

/**
 * A llama-server with a model, simulated on top of the fake upstream: what the
 * compaction engine needs to be tested against something that behaves like
 * the real server.
 *
 * - A served window (`/props` `n_ctx`, `/v1/models` `meta.n_ctx`) and the 400
 *   `exceed_context_size_error` for a prompt larger than it.
 * - A tokenizer that counts 25% more tokens than bytes/4 (local models count
 *   code and JSON above the heuristic), behind `/tokenize`, `/apply-template`
 *   and `/v1/chat/completions/input_tokens`, all agreeing with `prompt_tokens`.
 * - One slot with a prefix cache: a request reuses the tokens its prompt
 *   shares with what the slot last held (prompt and answer), reported as
 *   `timings.cache_n` / `prompt_n` like llama-server does.
 * - Summary requests (recognized by their instruction) answered with notes
 *   that list every planted fact visible in the prompt, after a delay, failing
 *   on demand.
 */

export interface SimulatedLlamaOptions {
  readonly window: number;
  /** Real tokens per byte; 1.25 / 4 by default (25% above the bytes/4 estimate). */
  readonly tokensPerByte?: number;
  readonly summaryDelayMs?: number;
  /**
   * The speeds its `timings` report (prompt_ms, predicted_ms), tokens a second: by default a 7B model on one GPU
   * (prefill ~5,000, decode ~130, the figures of issue 36). Reported only: the double answers at once.
   */
  readonly speeds?: { readonly prefill: number; readonly decode: number };
}

/** The speeds of a 7B model with llama.cpp on one GPU (issue 36). */
export const SIMULATED_SPEEDS = { prefill: 5000, decode: 130 } as const;

export interface PromptRecord {
  readonly kind: 'chat' | 'summary';
  readonly promptTokens: number;
  readonly cacheTokens: number;
  /** The tokens asked for the answer (`max_tokens`, or what is left of the window). */
  readonly maxTokens: number | null;
  readonly status: number;
  /** Tokens of the answer it wrote. */
  readonly completionTokens: number;
  readonly prompt: string;
  readonly messages: ChatMessage[];
  /** When the request arrived and when its answer was written (`performance.now()`). */
  readonly startedAt: number;
  readonly finishedAt: number;
}

const SUMMARY_MARKERS = ['Write handoff notes', 'Update the earlier notes', 'You write handoff notes'];

export class SimulatedLlama {
  readonly records: PromptRecord[] = [];
  readonly window: number;
  readonly tokensPerByte: number;
  readonly speeds: { readonly prefill: number; readonly decode: number };
  summaryDelayMs: number;
  /** How many of the next summary requests fail with a 500. */
  summaryFailures = 0;
  /** What the slot holds: the last prompt and the answer generated after it. */
  #slot = '';
  /** The chat completion handler, for tests that route some requests elsewhere. */
  readonly chat: FakeReply = (exchange) => this.#chat(exchange);
  /**
   * What a prompt larger than the window gets: llama-server's 400 by default;
   * another server's double (local-servers.ts) answers in its own words, or
   * `'truncate'`: the prompt is cut to the window and answered 200, as
   * Ollama's OpenAI endpoint does.
   */
  overflow: ((exchange: FakeExchange, promptTokens: number) => void | Promise<void>) | 'truncate' = (exchange, promptTokens) =>
    replies.json(400, {
      error: {
        code: 400,
        message: `request (${promptTokens} tokens) exceeds the available context size (${this.window} tokens), try increasing it`,
        type: 'exceed_context_size_error',
        n_prompt_tokens: promptTokens,
        n_ctx: this.window,
      },
    })(exchange);
  /** How many prompts were cut silently (overflow `'truncate'`). */
  truncated = 0;

  constructor(
    readonly upstream: FakeUpstream,
    options: SimulatedLlamaOptions,
  ) {
    this.window = options.window;
    this.tokensPerByte = options.tokensPerByte ?? 1.25 / 4;
    this.summaryDelayMs = options.summaryDelayMs ?? 0;
    this.speeds = options.speeds ?? SIMULATED_SPEEDS;
    this.#install();
  }

  tokensOf(text: string): number {
    return Math.ceil(Buffer.byteLength(text, 'utf8') * this.tokensPerByte);
  }

  /** A ChatML-like rendering, tools first (as Qwen templates put them in the system turn). */
  render(body: Record<string, unknown>): string {
    const messages = Array.isArray(body['messages']) ? (body['messages'] as ChatMessage[]) : [];
    let prompt = body['tools'] === undefined ? '' : `<tools>${JSON.stringify(body['tools'])}</tools>\n`;
    for (const message of messages) {
      const calls = Array.isArray(message.tool_calls) ? message.tool_calls.map((call) => `<tool_call>${JSON.stringify(call.function)}</tool_call>`).join('') : '';
      prompt += `<|im_start|>${message.role}\n${contentText(message.content)}${calls}<|im_end|>\n`;
    }
    return `${prompt}<|im_start|>assistant\n`;
  }

  get chatRecords(): PromptRecord[] {
    return this.records.filter((record) => record.kind === 'chat');
  }

  get summaryRecords(): PromptRecord[] {
    return this.records.filter((record) => record.kind === 'summary');
  }

  #install(): void {
    const { upstream } = this;
    upstream.route('GET', '/props', replies.json(200, { default_generation_settings: { n_ctx: this.window, params: {} }, total_slots: 1 }));
    upstream.route(
      'GET',
      '/v1/models',
      replies.json(200, { object: 'list', data: [{ id: 'sim', object: 'model', owned_by: 'llamacpp', meta: { n_ctx: this.window, n_ctx_train: this.window * 4 } }] }),
    );
    upstream.route('POST', '/v1/chat/completions/input_tokens', (exchange) =>
      replies.json(200, { input_tokens: this.tokensOf(this.render(bodyOf(exchange))) })(exchange),
    );
    upstream.route('POST', '/apply-template', (exchange) => replies.json(200, { prompt: this.render(bodyOf(exchange)) })(exchange));
    upstream.route('POST', '/tokenize', (exchange) => {
      const content = bodyOf(exchange)['content'];
      const count = typeof content === 'string' ? this.tokensOf(content) : 0;
      return replies.json(200, { tokens: Array.from({ length: count }, (_, index) => index % 32000) })(exchange);
    });
    upstream.route('POST', '/v1/chat/completions', this.chat);
    upstream.route('POST', '/chat/completions', this.chat);
  }

  async #chat(exchange: FakeExchange): Promise<void> {
    const body = bodyOf(exchange);
    const messages = Array.isArray(body['messages']) ? (body['messages'] as ChatMessage[]) : [];
    const prompt = this.render(body);
    const promptTokens = this.tokensOf(prompt);
    const lastText = contentText(messages.at(-1)?.content ?? '') + contentText(messages[0]?.content ?? '');
    const kind = SUMMARY_MARKERS.some((marker) => lastText.includes(marker)) ? 'summary' : 'chat';
    const maxTokens = typeof body['max_tokens'] === 'number' ? body['max_tokens'] : null;
    const startedAt = performance.now();
    const record = (status: number, cacheTokens: number, completionTokens = 0): void => {
      this.records.push({ kind, promptTokens, cacheTokens, maxTokens, status, completionTokens, prompt, messages, startedAt, finishedAt: performance.now() });
    };

    const overflow = this.overflow;
    if (promptTokens > this.window && overflow === 'truncate') this.truncated++;
    else if (promptTokens > this.window && overflow !== 'truncate') {
      record(400, 0);
      return overflow(exchange, promptTokens);
    }
    if (kind === 'summary') {
      if (this.summaryDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.summaryDelayMs));
      if (exchange.signal.aborted) return;
      if (this.summaryFailures > 0) {
        this.summaryFailures--;
        record(500, 0);
        return replies.json(500, { error: { code: 500, message: 'simulated summary failure', type: 'server_error' } })(exchange);
      }
    }

    const cacheTokens = Math.min(promptTokens - 1, this.tokensOf(prompt.slice(0, commonPrefixLength(this.#slot, prompt))));
    const answer = kind === 'summary' ? `NOTES: ${[...new Set(prompt.match(FACT_PATTERN) ?? [])].join(' ')}` : 'Done.';
    this.#slot = prompt + answer;
    const usage = { prompt_tokens: promptTokens, completion_tokens: this.tokensOf(answer) };
    record(200, cacheTokens, usage.completion_tokens);
    const promptN = promptTokens - cacheTokens;
    const timings = { cache_n: cacheTokens, prompt_n: promptN, prompt_ms: (promptN * 1000) / this.speeds.prefill, predicted_n: usage.completion_tokens, predicted_ms: (usage.completion_tokens * 1000) / this.speeds.decode };
    if (body['stream'] === true) {
      const streamOptions = body['stream_options'] as { include_usage?: unknown } | undefined;
      return replies.sse(chatStreamEvents({ content: [answer], includeUsage: streamOptions?.include_usage === true, usage, timings }))(exchange);
    }
    return replies.json(200, chatCompletionBody({ id: 'chatcmpl-sim', answer, usage, cachedTokens: cacheTokens, timings }))(exchange);
  }
}

function bodyOf(exchange: FakeExchange): Record<string, unknown> {
  const json = exchange.request.json;
  return typeof json === 'object' && json !== null && !Array.isArray(json) ? (json as Record<string, unknown>) : {};
}

function commonPrefixLength(a: string, b: string): number {
  const length = Math.min(a.length, b.length);
  let index = 0;
  while (index < length && a.charCodeAt(index) === b.charCodeAt(index)) index++;
  return index;
}
