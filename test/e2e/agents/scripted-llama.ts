import type { ServerResponse } from 'node:http';
import { findPairProblems, type PairProblem } from '../../../src/transcript/pairs.js';
import type { ChatMessage } from '../../../src/transcript/message.js';
import type { FakeExchange, FakeUpstream } from '../../support/fake-upstream.js';

/**
 * A scripted llama-server for real coding agents: it answers the agent's
 * main-task requests with calls to the agent's OWN tools (picked by name from
 * the request's `tools`), one scripted step per request, then a final text;
 * compactor's summary requests with notes; and every other request (a title,
 * a memory extractor) with a short text. It streams in llama-server's SSE
 * framing (role chunk, `reasoning_content` and content deltas, tool-call
 * deltas, finish chunk, usage chunk, `[DONE]`; `timings` on the usage chunk,
 * or on the finish chunk when no usage was asked for, as
 * test/fixtures/llama-server/chat_stream*.txt show) and serves
 * `/props` and `/v1/models` with the window it was given, and
 * `/v1/chat/completions/input_tokens` with its own count.
 *
 * Like llama-server with its one slot (`/props` `total_slots: 1`), it keeps
 * the last prompt it read and reports in `timings` what it could reuse of
 * it: `cache_n` the tokens of the prompt's common prefix with the previous
 * one (whatever request that was: a title or summary request in between
 * evicts the agent's prefix), `prompt_n` the rest, at least one token
 * (llama-server always evaluates the last), and `prompt_tokens = cache_n +
 * prompt_n` with `prompt_tokens_details.cached_tokens` in `usage`
 * (test/fixtures/llama-server/cache_reuse_*.txt). Its times are those of a 7B
 * model on one GPU ({@link SCRIPTED_SPEEDS}).
 *
 * The step comes from its own count of main-task requests, never from the
 * history: compaction shortens the history, and the script must go on
 * regardless.
 */

/** What a step asks for, in words any agent's tools can do. */
export type Action =
  | { readonly kind: 'list'; readonly pattern: string }
  | { readonly kind: 'read'; readonly path: string }
  | { readonly kind: 'grep'; readonly pattern: string }
  | { readonly kind: 'shell'; readonly command: string }
  | { readonly kind: 'edit'; readonly path: string; readonly old: string; readonly new: string }
  | { readonly kind: 'write'; readonly path: string; readonly content: string };

/** One answer of the model: tool calls (several = parallel calls), or the final text. */
export type Step = { readonly calls: readonly Action[] } | { readonly answer: string };

/** Tool names agents use for each kind of action, most specific first. */
const TOOL_NAMES: Readonly<Record<Action['kind'], readonly string[]>> = {
  list: ['glob', 'list_directory', 'ls', 'list'],
  read: ['read_file', 'read', 'view'],
  grep: ['grep_search', 'grep', 'search_file_content', 'search'],
  shell: ['run_shell_command', 'bash', 'shell'],
  edit: ['edit', 'replace', 'str_replace', 'edit_file'],
  write: ['write_file', 'write', 'create_file'],
};

/** Argument names agents use, most common first; the first one the tool declares is used. */
const PARAMETER_NAMES = {
  path: ['filePath', 'file_path', 'absolute_path', 'path'],
  old: ['oldString', 'old_string'],
  new: ['newString', 'new_string'],
  content: ['content'],
  pattern: ['pattern'],
  command: ['command'],
} as const;

interface ToolDeclaration {
  readonly name: string;
  readonly properties: readonly string[];
}

function toolDeclarations(body: Record<string, unknown>): ToolDeclaration[] {
  const tools = Array.isArray(body['tools']) ? (body['tools'] as unknown[]) : [];
  return tools.flatMap((tool) => {
    const fn = (tool as { function?: { name?: unknown; parameters?: { properties?: Record<string, unknown> } } }).function;
    if (typeof fn?.name !== 'string') return [];
    return [{ name: fn.name, properties: Object.keys(fn.parameters?.properties ?? {}) }];
  });
}

function parameterName(tool: ToolDeclaration, kind: keyof typeof PARAMETER_NAMES): string {
  const names = PARAMETER_NAMES[kind];
  return names.find((name) => tool.properties.includes(name)) ?? names[0];
}

/** The agent's own call for `action`: its tool's name and arguments in that tool's words. */
export function toolCallFor(action: Action, tools: readonly ToolDeclaration[], workDirectory: string): { name: string; arguments: Record<string, unknown> } {
  const tool = TOOL_NAMES[action.kind].map((name) => tools.find((declared) => declared.name === name)).find((found) => found !== undefined);
  if (tool === undefined) throw new Error(`scripted llama: the agent offers no tool for "${action.kind}" (tools: ${tools.map((t) => t.name).join(', ')})`);
  const absolute = (path: string): string => `${workDirectory}/${path}`;
  switch (action.kind) {
    case 'list':
      return { name: tool.name, arguments: { [parameterName(tool, 'pattern')]: action.pattern } };
    case 'read':
      return { name: tool.name, arguments: { [parameterName(tool, 'path')]: absolute(action.path) } };
    case 'grep':
      return { name: tool.name, arguments: { [parameterName(tool, 'pattern')]: action.pattern, path: workDirectory } };
    case 'shell':
      return {
        name: tool.name,
        arguments: {
          [parameterName(tool, 'command')]: action.command,
          ...(tool.properties.includes('description') ? { description: `Run ${action.command}` } : {}),
        },
      };
    case 'edit':
      return {
        name: tool.name,
        arguments: { [parameterName(tool, 'path')]: absolute(action.path), [parameterName(tool, 'old')]: action.old, [parameterName(tool, 'new')]: action.new },
      };
    case 'write':
      return { name: tool.name, arguments: { [parameterName(tool, 'path')]: absolute(action.path), [parameterName(tool, 'content')]: action.content } };
  }
}

/** The text of a message's content, whether a string or a list of text parts. */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content.map((part) => (typeof part === 'object' && part !== null && typeof (part as { text?: unknown }).text === 'string' ? (part as { text: string }).text : '')).join('');
  }
  return '';
}

/** The double's tokenizer: bytes/4 of the messages and tools as JSON (quotes and escapes included, so it over-counts a little). */
export function tokensOf(body: Record<string, unknown>): number {
  return Math.ceil(Buffer.byteLength(JSON.stringify({ messages: body['messages'], tools: body['tools'] ?? null })) / 4);
}

/**
 * The prompt as the slot holds it: the tools first (chat templates put them in
 * the system turn), then each message in order, so a prompt that only grew
 * shares all of the last one as its prefix and an edit shares what came before it.
 */
export function renderedPrompt(body: Record<string, unknown>): string {
  const messages = Array.isArray(body['messages']) ? (body['messages'] as unknown[]) : [];
  return JSON.stringify(body['tools'] ?? null) + messages.map((message) => JSON.stringify(message)).join('\n');
}

/** The speeds its `timings` report, tokens a second: a 7B model with llama.cpp on one GPU (issue 36). */
export const SCRIPTED_SPEEDS = { prefill: 5000, decode: 130 } as const;

/** What llama-server's `timings` say of one answer: the cached prefix, the tokens read, the tokens written, and their times. */
export interface ScriptedTimings {
  readonly cache_n: number;
  readonly prompt_n: number;
  readonly prompt_ms: number;
  readonly predicted_n: number;
  readonly predicted_ms: number;
}

function timingsOf(cached: number, promptTokens: number, completionTokens: number): ScriptedTimings {
  const read = promptTokens - cached;
  return {
    cache_n: cached,
    prompt_n: read,
    prompt_ms: (read * 1000) / SCRIPTED_SPEEDS.prefill,
    predicted_n: completionTokens,
    predicted_ms: (completionTokens * 1000) / SCRIPTED_SPEEDS.decode,
  };
}

function commonPrefixLength(a: string, b: string): number {
  const length = Math.min(a.length, b.length);
  let index = 0;
  while (index < length && a.charCodeAt(index) === b.charCodeAt(index)) index++;
  return index;
}

/**
 * What a thinking model writes before acting, echoed back by agents as
 * `reasoning_content`: about 700 characters a step, as a small local model's
 * thinking runs, so the history grows by its thinking as well as its results.
 */
function reasoningOf(step: number, scripted: Step): string {
  const plan = 'answer' in scripted ? 'write the final answer' : scripted.calls.map((action) => `${action.kind} ${'path' in action ? action.path : ''}`.trim()).join(' and ');
  const sentence = `Step ${step + 1}: to make progress on the shop task I will ${plan}, then look at what comes back before deciding the next step. `;
  return sentence.repeat(Math.ceil(700 / sentence.length));
}

export type RequestKind = 'main' | 'summary' | 'side';

export interface ReceivedChat {
  readonly kind: RequestKind;
  readonly body: Record<string, unknown>;
  readonly headers: FakeExchange['request']['headers'];
  /** {@link tokensOf} the body. */
  readonly tokens: number;
  readonly pairProblems: readonly PairProblem[];
  /** The main-task step this request was answered with (main requests only). */
  readonly step?: number;
  /** The tokens it reported taken from its slot's cache (`timings.cache_n`). */
  readonly cached: number;
}

/** compactor's summary requests: `tool_choice: "none"` and its instruction last (suffix mode), or its own system prompt (prepend mode). */
export function isSummaryRequest(body: Record<string, unknown>): boolean {
  const messages = Array.isArray(body['messages']) ? (body['messages'] as ChatMessage[]) : [];
  const last = messages.at(-1);
  const first = messages[0];
  const suffix = body['tool_choice'] === 'none' && last?.role === 'user' && contentText(last.content).includes('Write handoff notes');
  const prepend = first?.role === 'system' && contentText(first.content).startsWith('You write handoff notes');
  return suffix || prepend;
}

/** How the double's notes begin (each summary's differ by the messages it read): a forwarded prompt shows the notes applied. */
export const NOTES_OPENING = 'Notes: the agent is fixing the shop project;';

const CHUNK_FRAME = { created: 1795997435, id: 'chatcmpl-scripted', model: '/models/scripted.gguf', system_fingerprint: 'b10587-3f545bec' };

interface Answer {
  readonly reasoning?: string;
  readonly content?: string;
  readonly toolCalls?: ReadonlyArray<{ readonly id: string; readonly name: string; readonly arguments: string }>;
}

/** llama-server's SSE events for one answer (reasoning, content and tool calls in pieces, as `--jinja --reasoning-format deepseek` streams them). */
function streamEvents(answer: Answer, promptTokens: number, cached: number, includeUsage: boolean): string[] {
  const event = (value: unknown): string => `data: ${JSON.stringify(value)}\n\n`;
  const delta = (value: unknown): string => event({ choices: [{ finish_reason: null, index: 0, delta: value }], ...CHUNK_FRAME, object: 'chat.completion.chunk' });
  const pieces = (text: string): string[] => text.match(/[\s\S]{1,24}/g) ?? [];
  const events = [delta({ role: 'assistant', content: null })];
  for (const piece of pieces(answer.reasoning ?? '')) events.push(delta({ reasoning_content: piece }));
  for (const piece of pieces(answer.content ?? '')) events.push(delta({ content: piece }));
  (answer.toolCalls ?? []).forEach((call, index) => {
    events.push(delta({ tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }] }));
    for (const piece of pieces(call.arguments)) events.push(delta({ tool_calls: [{ index, function: { arguments: piece } }] }));
  });
  const completionTokens = Math.ceil(JSON.stringify(answer).length / 4);
  const timings = timingsOf(cached, promptTokens, completionTokens);
  const finish = (answer.toolCalls ?? []).length > 0 ? 'tool_calls' : 'stop';
  // llama-server puts `timings` on the usage chunk when there is one, else on the finish chunk (chat_stream.txt, chat_stream_no_usage.txt).
  events.push(event({ choices: [{ finish_reason: finish, index: 0, delta: {} }], ...CHUNK_FRAME, object: 'chat.completion.chunk', ...(includeUsage ? {} : { timings }) }));
  if (includeUsage) {
    const usage = { completion_tokens: completionTokens, prompt_tokens: promptTokens, total_tokens: promptTokens + completionTokens, prompt_tokens_details: { cached_tokens: cached } };
    events.push(event({ choices: [], ...CHUNK_FRAME, object: 'chat.completion.chunk', usage, timings }));
  }
  events.push('data: [DONE]\n\n');
  return events;
}

function completion(content: string, promptTokens: number, cached: number): unknown {
  const completionTokens = Math.ceil(content.length / 4);
  return {
    choices: [{ finish_reason: 'stop', index: 0, message: { role: 'assistant', content } }],
    ...CHUNK_FRAME,
    object: 'chat.completion',
    usage: { completion_tokens: completionTokens, prompt_tokens: promptTokens, total_tokens: promptTokens + completionTokens, prompt_tokens_details: { cached_tokens: cached } },
    timings: timingsOf(cached, promptTokens, completionTokens),
  };
}

function writeJson(response: ServerResponse, status: number, value: unknown): void {
  const bytes = Buffer.from(JSON.stringify(value));
  response.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': String(bytes.length) });
  response.end(bytes);
}

export interface ScriptedLlamaOptions {
  readonly script: readonly Step[];
  /** Where the agent works: paths in the script are relative to it, the agent's tools get them absolute. */
  readonly workDirectory: string;
  /** The window `/props` and `/v1/models` serve. */
  readonly window: number;
  readonly model?: string;
}

export class ScriptedLlama {
  readonly received: ReceivedChat[] = [];
  readonly #options: ScriptedLlamaOptions;
  /** The sorted tool names of the first request with tools: what marks a main-task request. */
  #mainTools: string | null = null;
  #mainCount = 0;
  /** What its one slot holds: the last prompt it read, rendered. */
  #slot = '';

  constructor(options: ScriptedLlamaOptions) {
    this.#options = options;
  }

  /** Installs the chat, `/props` and `/v1/models` routes on `upstream`. */
  attach(upstream: FakeUpstream): this {
    const { window, model = 'scripted' } = this.#options;
    const props = { default_generation_settings: { n_ctx: window }, total_slots: 1, model_path: '/models/scripted.gguf' };
    const models = { object: 'list', data: [{ id: model, object: 'model', owned_by: 'llamacpp', meta: { n_ctx: window, n_ctx_train: window } }] };
    upstream.route('GET', '/props', ({ response }) => writeJson(response, 200, props));
    upstream.route('GET', '/v1/models', ({ response }) => writeJson(response, 200, models));
    upstream.route('POST', '/v1/chat/completions', (exchange) => this.#answer(exchange));
    // compactor asks for exact counts near its thresholds: the double counts with its own tokenizer, as llama-server would with its own.
    upstream.route('POST', '/v1/chat/completions/input_tokens', ({ request, response }) =>
      writeJson(response, 200, { input_tokens: tokensOf((request.json ?? {}) as Record<string, unknown>) }),
    );
    return this;
  }

  requestsOf(kind: RequestKind): ReceivedChat[] {
    return this.received.filter((request) => request.kind === kind);
  }

  /** Every tool result the double was shown in main-task requests, as text. */
  toolResults(): string[] {
    const results = new Set<string>();
    for (const request of this.requestsOf('main')) {
      for (const message of request.body['messages'] as ChatMessage[]) if (message.role === 'tool') results.add(contentText(message.content));
    }
    return [...results];
  }

  #kindOf(body: Record<string, unknown>): RequestKind {
    if (isSummaryRequest(body)) return 'summary';
    const tools = toolDeclarations(body);
    if (tools.length === 0) return 'side';
    const names = tools.map((tool) => tool.name).sort().join(',');
    this.#mainTools ??= names;
    return names === this.#mainTools ? 'main' : 'side';
  }

  #answer(exchange: FakeExchange): void {
    const body = (exchange.request.json ?? {}) as Record<string, unknown>;
    const kind = this.#kindOf(body);
    const tokens = tokensOf(body);
    const messages = Array.isArray(body['messages']) ? (body['messages'] as ChatMessage[]) : [];
    const step = kind === 'main' ? this.#mainCount++ : undefined;
    const prompt = renderedPrompt(body);
    const cached = Math.min(tokens - 1, Math.floor(Buffer.byteLength(prompt.slice(0, commonPrefixLength(this.#slot, prompt))) / 4));
    this.#slot = prompt;
    this.received.push({ kind, body, headers: exchange.request.headers, tokens, pairProblems: findPairProblems(messages), cached, ...(step === undefined ? {} : { step }) });

    let answer: Answer;
    if (kind === 'summary') {
      answer = { content: `${NOTES_OPENING} ${messages.length} messages so far; tests run with node --test.` };
    } else if (kind === 'side') {
      answer = { content: 'Fix the shop project' };
    } else {
      answer = this.#stepAnswer(step!, body);
    }
    if (body['stream'] !== true) {
      writeJson(exchange.response, 200, completion(answer.content ?? '', tokens, cached));
      return;
    }
    const streamOptions = body['stream_options'] as { include_usage?: unknown } | undefined;
    const events = streamEvents(answer, tokens, cached, streamOptions?.include_usage === true);
    exchange.response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    exchange.response.end(events.join(''));
  }

  #stepAnswer(step: number, body: Record<string, unknown>): Answer {
    const { script, workDirectory } = this.#options;
    const scripted = script[Math.min(step, script.length - 1)]!;
    const reasoning = reasoningOf(step, scripted);
    if ('answer' in scripted) return { reasoning, content: scripted.answer };
    const tools = toolDeclarations(body);
    const toolCalls = scripted.calls.map((action, index) => {
      const call = toolCallFor(action, tools, workDirectory);
      return { id: `call_${step + 1}_${index + 1}`, name: call.name, arguments: JSON.stringify(call.arguments) };
    });
    return { reasoning, content: '', toolCalls };
  }
}
