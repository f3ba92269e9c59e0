import { contentText, type ChatMessage } from '../../src/transcript/message.js';
import { chatCompletionBody, chatStreamEvents, type FakeExchange, type FakeUpstream, replies } from './fake-upstream.js';
import { SlotModel, type SlotModelOptions } from './slot-model.js';

/**
 * A llama-server with N slots on the fake upstream, for the slot scheduler
 * (issue 28): the HTTP surface of slot-model.ts, with the answer shapes of
 * the recorded fixtures (props.json, slots.txt) and of the llama-server
 * README for the slot actions.
 *
 * - `GET /props` `total_slots`, `GET /slots` (`id`, `n_ctx`, `is_processing`).
 * - `POST /v1/chat/completions` with or without `id_slot` (-1 is "any");
 *   tasks wait for a slot like llama-server's deferred queue; the answer's
 *   `timings.cache_n` / `prompt_n` come from the model, `__verbose.id_slot`
 *   names the slot when the body says `verbose: true`.
 * - `POST /slots/{id}?action=save|restore|erase` with `{"filename"}`: 501
 *   without a save path (`slotSave: false`), 400 for a busy slot or a
 *   missing file, like the real server.
 * - Time: a task takes `promptN × msPerPromptToken + generated ×
 *   msPerGeneratedToken`, slots in parallel.
 */

export interface SlotLlamaOptions extends SlotModelOptions {
  readonly window?: number;
  /** `--slot-save-path` given. */
  readonly slotSave?: boolean;
  readonly msPerPromptToken?: number;
  readonly msPerGeneratedToken?: number;
  /** Tokens generated per answer. */
  readonly generatedTokens?: number;
  /** Tokens generated for a summary request (compactor's instruction or system prompt in it): a summary writes far more than a turn. */
  readonly summaryGeneratedTokens?: number;
  /** Answer 503 to a request pinned to a busy slot, rather than queue it. */
  readonly failBusyPins?: boolean;
  /** Further paths that answer as `/v1/chat/completions` does (a toy wire format's route, test/extension-points.test.ts). */
  readonly chatAliases?: readonly string[];
}

export interface SlotTaskRecord {
  readonly slot: number;
  readonly pinned: number | null;
  readonly cacheN: number;
  readonly promptN: number;
  readonly queuedMs: number;
  readonly prompt: string;
  /** Where the longest copy of the prompt's prefix was when it started (tokens): its slot, another idle slot, a busy one, the RAM cache. */
  readonly copies: { readonly own: number; readonly idle: number; readonly busy: number; readonly ram: number };
  readonly summary: boolean;
  readonly startedAt: number;
}

interface Waiter {
  readonly prompt: string;
  readonly pinned: number | undefined;
  readonly start: (slot: number) => void;
}

export class SlotLlama {
  /** While set, every answer waits for it before it is written (its slot stays busy). */
  holdAnswers: Promise<void> | null = null;
  readonly model: SlotModel;
  readonly tasks: SlotTaskRecord[] = [];
  /** Slot actions received, in order: `save 2 f.bin`. */
  readonly actions: string[] = [];
  readonly #waiting: Waiter[] = [];
  readonly #options: SlotLlamaOptions;

  constructor(
    readonly upstream: FakeUpstream,
    options: SlotLlamaOptions,
  ) {
    this.model = new SlotModel(options);
    this.#options = options;
    this.#install();
  }

  /** How many requests wait for a slot inside the server. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** The ChatML-like prompt of a body. */
  render(body: Record<string, unknown>): string {
    const messages = Array.isArray(body['messages']) ? (body['messages'] as ChatMessage[]) : [];
    let prompt = body['tools'] === undefined ? '' : `<tools>${JSON.stringify(body['tools'])}</tools>\n`;
    for (const message of messages) prompt += `<|im_start|>${message.role}\n${contentText(message.content)}<|im_end|>\n`;
    return `${prompt}<|im_start|>assistant\n`;
  }

  #install(): void {
    const { upstream } = this;
    const window = this.#options.window ?? 65536;
    upstream.route('GET', '/props', replies.json(200, { default_generation_settings: { n_ctx: window, params: {} }, total_slots: this.model.slots.length, model_path: '/models/sim.gguf', endpoint_slots: true }));
    upstream.route('GET', '/slots', (exchange) =>
      replies.json(200, this.model.slots.map((slot) => ({ id: slot.id, n_ctx: window, speculative: false, is_processing: slot.busy })))(exchange),
    );
    for (const slot of this.model.slots) upstream.route('POST', `/slots/${slot.id}`, (exchange) => this.#action(slot.id, exchange));
    for (const path of ['/v1/chat/completions', ...(this.#options.chatAliases ?? [])]) upstream.route('POST', path, (exchange) => this.#chat(exchange));
    // The exact count compaction asks for near a threshold.
    upstream.route('POST', '/v1/chat/completions/input_tokens', (exchange) => replies.json(200, { input_tokens: this.model.tokensOf(this.render(bodyOf(exchange))) })(exchange));
  }

  #action(slotId: number, exchange: FakeExchange): void | Promise<void> {
    const action = new URL(exchange.request.path, 'http://x').searchParams.get('action') ?? '';
    const filename = bodyOf(exchange)['filename'];
    this.actions.push(`${action} ${slotId}${typeof filename === 'string' ? ` ${filename}` : ''}`);
    if (this.#options.slotSave !== true && action !== 'erase') {
      return replies.json(501, { error: { code: 501, message: 'This server does not support slots action. Start it with `--slot-save-path`', type: 'not_supported_error' } })(exchange);
    }
    const invalid = (message: string): void | Promise<void> => replies.json(400, { error: { code: 400, message, type: 'invalid_request_error' } })(exchange);
    if (action === 'erase') {
      const erased = this.model.erase(slotId);
      return erased === undefined ? invalid('Unable to erase slot, slot is busy') : replies.json(200, { id_slot: slotId, n_erased: erased.nErased })(exchange);
    }
    if (typeof filename !== 'string' || filename.includes('/')) return invalid('Invalid filename');
    if (action === 'save') {
      const saved = this.model.save(slotId, filename);
      if (saved === undefined) return invalid('Unable to save slot, slot is busy');
      return replies.json(200, { id_slot: slotId, filename, n_saved: saved.nSaved, n_written: saved.nWritten, timings: { save_ms: 3 } })(exchange);
    }
    if (action === 'restore') {
      const restored = this.model.restore(slotId, filename);
      if (restored === undefined) return invalid('Unable to restore slot, no available slot or file');
      return replies.json(200, { id_slot: slotId, filename, n_restored: restored.nRestored, n_read: restored.nRead, timings: { restore_ms: 7 } })(exchange);
    }
    return invalid('Invalid action');
  }

  async #chat(exchange: FakeExchange): Promise<void> {
    const body = bodyOf(exchange);
    const prompt = this.render(body);
    const idSlot = typeof body['id_slot'] === 'number' && body['id_slot'] >= 0 ? body['id_slot'] : undefined;
    if (idSlot !== undefined && this.model.slots[idSlot] === undefined) {
      return replies.json(400, { error: { code: 400, message: `Invalid id_slot: ${idSlot}`, type: 'invalid_request_error' } })(exchange);
    }
    if (idSlot !== undefined && this.model.slots[idSlot]!.busy) {
      this.model.counters.busyPins++;
      if (this.#options.failBusyPins === true) {
        return replies.json(503, { error: { code: 503, message: 'slot is busy', type: 'unavailable_error' } })(exchange);
      }
    }
    const queuedAt = performance.now();
    const slot = await this.#slotFor(prompt, idSlot);
    const copies = this.model.whereIs(slot, prompt);
    const { cacheN, promptN } = this.model.begin(slot, prompt);
    const isSummary = prompt.includes('handoff notes');
    this.tasks.push({ slot, pinned: idSlot ?? null, cacheN, promptN, queuedMs: performance.now() - queuedAt, prompt, copies, summary: isSummary, startedAt: performance.now() });
    const generated = (isSummary ? this.#options.summaryGeneratedTokens : undefined) ?? this.#options.generatedTokens ?? 8;
    const answer = `Answer of ${generated} tokens. `.padEnd(generated * 4, '.');
    const ms = promptN * (this.#options.msPerPromptToken ?? 0) + generated * (this.#options.msPerGeneratedToken ?? 0);
    if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
    // A test that needs a slot busy for as long as it looks holds the answers here, instead of hoping a timer is long enough.
    if (this.holdAnswers !== null) await this.holdAnswers;
    this.model.end(slot, answer);
    this.#wake();
    if (exchange.signal.aborted) return;

    const usage = { prompt_tokens: cacheN + promptN, completion_tokens: generated };
    // As llama-server reports them: the time its prompt took (the double's clock), which the slot scheduler learns its speed from.
    const promptMs = promptN * (this.#options.msPerPromptToken ?? 0);
    const timings = { cache_n: cacheN, prompt_n: promptN, prompt_ms: promptMs, predicted_n: generated, predicted_ms: generated * (this.#options.msPerGeneratedToken ?? 0) };
    if (body['stream'] === true) return replies.sse(chatStreamEvents({ content: [answer], includeUsage: true, usage, timings }))(exchange);
    const verbose = body['verbose'] === true ? { __verbose: { id_slot: slot } } : {};
    return replies.json(200, { ...chatCompletionBody({ id: 'chatcmpl-slots', answer, usage, cachedTokens: cacheN, timings }), ...verbose })(exchange);
  }

  #slotFor(prompt: string, pinned: number | undefined): Promise<number> {
    const now = this.#waiting.length === 0 ? this.model.choose(prompt, pinned) : undefined;
    if (now !== undefined) {
      this.model.slots[now]!.busy = true;
      return Promise.resolve(now);
    }
    return new Promise((start) => this.#waiting.push({ prompt, pinned, start }));
  }

  /** A slot freed: the waiting tasks that can start now start, in arrival order. */
  #wake(): void {
    for (let index = 0; index < this.#waiting.length; ) {
      const waiter = this.#waiting[index]!;
      const slot = this.model.choose(waiter.prompt, waiter.pinned);
      if (slot === undefined) {
        index++;
        continue;
      }
      this.#waiting.splice(index, 1);
      this.model.slots[slot]!.busy = true;
      waiter.start(slot);
    }
  }
}

function bodyOf(exchange: FakeExchange): Record<string, unknown> {
  const json = exchange.request.json;
  return typeof json === 'object' && json !== null && !Array.isArray(json) ? (json as Record<string, unknown>) : {};
}
