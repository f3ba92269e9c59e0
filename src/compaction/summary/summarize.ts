import { UpstreamStatusError } from '../../errors.js';
import type { ChatMessage } from '../../transcript/message.js';
import { contentText } from '../../transcript/message.js';
import { isMarked } from '../../transcript/marks.js';
import { renderTranscript } from '../../transcript/render.js';
import type { CallHeaders } from '../upstream-json.js';
import {
  DEFAULT_SUMMARY_SYSTEM_PROMPT,
  openingWords,
  prependRequestText,
  suffixInstruction,
} from './prompt.js';

/**
 * Writing the notes that replace old messages.
 *
 * Suffix mode first: the whole candidate, as compactor would forward it, plus
 * one instruction. Its prompt is a prefix of what the upstream already holds
 * in its KV cache, so the summary costs almost no prompt processing. Prepend
 * mode when that fails or cannot fit: a fresh request with the old part
 * rendered as text (never replayed as messages, so no half pair reaches the
 * wire), folded chunk by chunk when it is larger than the window.
 */

/**
 * Sends one non-streamed chat completion upstream and returns its parsed JSON
 * (or throws). `headers` carry the client's credential when the upstream has no key of its own.
 */
export type ChatCall = (body: Record<string, unknown>, signal: AbortSignal, headers?: CallHeaders) => Promise<unknown>;

export interface SummarizeRequest {
  /** The client's request body: model, tools and template fields come from it. */
  readonly body: Readonly<Record<string, unknown>>;
  /** What compactor would forward (an earlier epoch applied). */
  readonly candidate: readonly ChatMessage[];
  /** The old part is `candidate[head, cut)`. */
  readonly head: number;
  readonly cut: number;
  /** Notes of the epoch the candidate starts from, merged rather than re-summarized. */
  readonly earlierNotes: string | null;
  /** The summarizer's window in tokens; null when unknown (then every request is tried as it is). */
  readonly window: number | null;
  /** Size in real tokens of messages sent with the request's tools (ratio applied). */
  readonly sizeOfMessages: (messages: readonly ChatMessage[], withTools: boolean) => number;
  readonly model: string;
  readonly maxTokens: number;
  readonly systemPrompt?: string;
  readonly signal: AbortSignal;
  readonly onProgress?: (progress: SummaryProgress) => void;
}

export interface SummaryProgress {
  readonly messages: number;
  readonly chunk: number;
  readonly chunks: number;
}

export interface SummaryResult {
  readonly notes: string;
  readonly mode: 'suffix' | 'suffix-cut' | 'prepend';
  /** Upstream calls made, failed ones included. */
  readonly calls: number;
}

export class SummaryError extends Error {
  constructor(
    message: string,
    readonly calls: number,
    override readonly cause?: unknown,
  ) {
    super(message);
    this.name = 'SummaryError';
  }
}

/** An upstream error type worth naming: an identifier (`exceed_context_size_error`), not free text. */
const ERROR_TYPE = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * Why a summary call failed, in words that may be logged and shown to a
 * client. An upstream's error message can quote the prompt (llama-server's
 * JSON errors quote what they could not parse: "last read: '…'"), so an
 * error status is named by its status and error type only.
 */
function failureReason(error: unknown): string {
  if (error instanceof UpstreamStatusError) {
    const body = error.upstreamBody;
    const inner = typeof body === 'object' && body !== null && 'error' in body ? body.error : undefined;
    const type = typeof inner === 'object' && inner !== null && 'type' in inner ? inner.type : undefined;
    return `the upstream answered ${error.status}${typeof type === 'string' && ERROR_TYPE.test(type) ? ` (${type})` : ''}`;
  }
  return error instanceof Error ? error.message : String(error);
}

/**
 * Fields of the client's request a summary must not inherit: they shape the
 * answer (format, count, sampling output) rather than the prompt, or are set
 * by compactor itself.
 */
const FIELDS_NOT_INHERITED = [
  'messages',
  'stream',
  'stream_options',
  'response_format',
  'n',
  'logprobs',
  'top_logprobs',
  'max_tokens',
  'max_completion_tokens',
  'tool_choice',
  'parallel_tool_calls',
  'function_call',
  'functions',
  'prediction',
  'logit_bias',
  'stop',
  'user',
  'metadata',
  'store',
] as const;

/** Fields that change how the template renders the prompt; a prepend-mode request keeps them for the same reason. */
const TEMPLATE_FIELDS = ['chat_template_kwargs', 'reasoning_format', 'chat_template'] as const;

/** Room a prepend-mode request keeps for its own words: section titles and the task, with margin. */
const INSTRUCTION_TOKENS = 400;

function suffixBody(request: SummarizeRequest, messages: ChatMessage[]): Record<string, unknown> {
  const body: Record<string, unknown> = { ...request.body };
  for (const field of FIELDS_NOT_INHERITED) delete body[field];
  body['model'] = request.model;
  body['messages'] = messages;
  body['max_tokens'] = request.maxTokens;
  body['stream'] = false;
  // Same tools as the conversation (the template renders them at the start of
  // the prompt, so dropping them would lose the KV cache), but no tool call.
  if (Array.isArray(request.body['tools']) && request.body['tools'].length > 0) body['tool_choice'] = 'none';
  return body;
}

function prependBody(request: SummarizeRequest, text: string): Record<string, unknown> {
  const body: Record<string, unknown> = {
    model: request.model,
    messages: [
      { role: 'system', content: request.systemPrompt ?? DEFAULT_SUMMARY_SYSTEM_PROMPT },
      { role: 'user', content: text },
    ],
    max_tokens: request.maxTokens,
    stream: false,
  };
  for (const field of TEMPLATE_FIELDS) {
    if (request.body[field] !== undefined) body[field] = request.body[field];
  }
  return body;
}

/**
 * The notes in a chat completion, or null when it has none: no text, only a
 * tool call, or only reasoning. `<think>` blocks some models leave in the
 * content are not notes.
 */
export function notesOf(response: unknown): string | null {
  if (typeof response !== 'object' || response === null) return null;
  const choices = (response as { choices?: unknown }).choices;
  if (!Array.isArray(choices)) return null;
  const message = (choices[0] as { message?: ChatMessage } | undefined)?.message;
  if (message === undefined || message === null || typeof message !== 'object') return null;
  if (Array.isArray(message.tool_calls) && message.tool_calls.length > 0) return null;
  const text = contentText(message.content)
    .replace(/<think>[\s\S]*?<\/think>/g, '')
    // A block the template opened in the prompt (R1-style templates with `reasoning_format: none`) shows only its end…
    .replace(/^[\s\S]*<\/think>/, '')
    // …and one that max_tokens cut off shows only its start: reasoning, not notes.
    .replace(/<think>[\s\S]*$/, '')
    .trim();
  return text === '' ? null : text;
}

/** Whether a request of `size` tokens (its instruction included) leaves room for the notes. */
function fits(request: SummarizeRequest, size: number): boolean {
  return request.window === null || size + request.maxTokens <= request.window;
}

/** The old part as prepend mode sees it: without compactor's earlier notes, which travel in their own section. */
function oldMessagesOf(request: SummarizeRequest): { messages: ChatMessage[]; earlierNotes: string | null } {
  let earlierNotes = request.earlierNotes;
  const messages: ChatMessage[] = [];
  for (let index = request.head; index < request.cut; index++) {
    const message = request.candidate[index]!;
    if (isMarked(message, 'summary')) {
      // Without the epoch's notes (a store that lost them), read them back from the pair's user message.
      if (earlierNotes === null && message.role === 'user') earlierNotes = contentText(message.content).replace(/^\[compacted:summary\] /, '');
      continue;
    }
    if (isMarked(message, 'steps')) {
      const notes = notesPrefix(message);
      if (earlierNotes === null && notes !== null) earlierNotes = notes.replace(/^\[compacted:steps\] /, '');
      messages.push(withoutNotes(message));
      continue;
    }
    messages.push(message);
  }
  return { messages, earlierNotes };
}

/** The marked notes a steps compaction put at the head of an assistant message (a first text part, or the whole string before its last blank line). */
function notesPrefix(message: ChatMessage): string | null {
  const { content } = message;
  if (Array.isArray(content)) {
    const first = content[0]?.['text'];
    return typeof first === 'string' ? first.trimEnd() : null;
  }
  return typeof content === 'string' ? content : null;
}

/**
 * The assistant message without the notes at its head. A list keeps its own
 * parts; a string keeps nothing, since the notes cannot be told apart from the
 * message's text there (and the epoch's notes already carry what it said).
 */
function withoutNotes(message: ChatMessage): ChatMessage {
  const { content } = message;
  if (Array.isArray(content)) return { ...message, content: content.slice(1) };
  return { ...message, content: '' };
}

/**
 * Splits rendered messages into chunks whose text fits `chunkTokens`, at
 * message boundaries; a single message larger than that is split by
 * characters (never inside a surrogate pair).
 */
export function chunkTranscript(rendered: readonly string[], chunkTokens: number, tokensOf: (text: string) => number): string[] {
  const chunks: string[] = [];
  const joined = (start: number, end: number): string => rendered.slice(start, end).join('\n\n');
  const fits = (start: number, end: number): boolean => tokensOf(joined(start, end)) <= chunkTokens;
  for (let start = 0; start < rendered.length; ) {
    const text = rendered[start]!;
    if (tokensOf(text) > chunkTokens) {
      // One message larger than a chunk: cut it into the longest pieces that fit by the same measure.
      // (Pieces of proportional length do not: bytes are not spread evenly over characters, and the
      // measure may add a fixed cost to every piece.)
      for (let at = 0; at < text.length; ) {
        const end = pieceEnd(text, at, chunkTokens, tokensOf);
        chunks.push(text.slice(at, end));
        at = end;
      }
      start++;
      continue;
    }
    // The most messages from `start` that fit one chunk: doubling the count while they fit, then
    // bisecting, so a chunk costs a few measures of its own length. Measuring the chunk again after
    // each message added was quadratic: 50,000 short messages blocked the event loop for seconds.
    let good = start + 1;
    let bad = rendered.length + 1;
    for (let count = 2; good < rendered.length; count *= 2) {
      const end = Math.min(rendered.length, start + count);
      if (!fits(start, end)) {
        bad = end;
        break;
      }
      good = end;
    }
    while (bad - good > 1) {
      const middle = Math.floor((good + bad) / 2);
      if (fits(start, middle)) good = middle;
      else bad = middle;
    }
    chunks.push(joined(start, good));
    start = good;
  }
  return chunks;
}

const isHighSurrogate = (code: number): boolean => code >= 0xd800 && code <= 0xdbff;

/**
 * The end of the longest piece of `text` from `start` that fits `chunkTokens`:
 * doubling the length while it fits, then bisecting, so a piece costs a few
 * measures of its own length. Never ends between the halves of a surrogate
 * pair, and always takes at least one character.
 */
function pieceEnd(text: string, start: number, chunkTokens: number, tokensOf: (text: string) => number): number {
  const fits = (end: number): boolean => tokensOf(text.slice(start, end)) <= chunkTokens;
  let good = start;
  let bad = text.length + 1;
  for (let length = 1; ; length *= 2) {
    const end = Math.min(text.length, start + length);
    if (!fits(end)) {
      bad = end;
      break;
    }
    good = end;
    if (end === text.length) break;
  }
  while (bad - good > 1) {
    const middle = Math.floor((good + bad) / 2);
    if (fits(middle)) good = middle;
    else bad = middle;
  }
  if (good === start) good = start + 1;
  if (good < text.length && isHighSurrogate(text.charCodeAt(good - 1))) good = good - 1 > start ? good - 1 : good + 1;
  return good;
}

async function callForNotes(call: ChatCall, body: Record<string, unknown>, signal: AbortSignal): Promise<string> {
  const notes = notesOf(await call(body, signal));
  if (notes === null) throw new Error('the summary answer had no text (empty, reasoning only, or a tool call)');
  return notes;
}

async function summarizeSuffix(request: SummarizeRequest, call: ChatCall): Promise<{ notes: string; mode: 'suffix' | 'suffix-cut' } | null> {
  const hasEarlierNotes = request.candidate
    .slice(request.head, request.cut)
    .some((message) => isMarked(message, 'summary') || isMarked(message, 'steps'));
  const kept = request.candidate[request.cut];
  const whole = [
    ...request.candidate,
    {
      role: 'user',
      content: suffixInstruction({ keptOpening: kept === undefined ? null : openingWords(contentText(kept.content)) || '(no text)', hasEarlierNotes }),
    },
  ];
  if (fits(request, request.sizeOfMessages(whole, true))) {
    request.onProgress?.({ messages: request.cut - request.head, chunk: 1, chunks: 1 });
    return { notes: await callForNotes(call, suffixBody(request, whole), request.signal), mode: 'suffix' };
  }
  const cutOnly = [
    ...request.candidate.slice(0, request.cut),
    { role: 'user', content: suffixInstruction({ keptOpening: null, hasEarlierNotes }) },
  ];
  if (fits(request, request.sizeOfMessages(cutOnly, true))) {
    request.onProgress?.({ messages: request.cut - request.head, chunk: 1, chunks: 1 });
    return { notes: await callForNotes(call, suffixBody(request, cutOnly), request.signal), mode: 'suffix-cut' };
  }
  return null;
}

async function summarizePrepend(request: SummarizeRequest, call: ChatCall): Promise<string> {
  const { messages, earlierNotes } = oldMessagesOf(request);
  const rendered = messages.map((message) => renderTranscript([message]));
  const tokensOfText = (text: string): number => request.sizeOfMessages([{ role: 'user', content: text }], false);
  const system = tokensOfText(request.systemPrompt ?? DEFAULT_SUMMARY_SYSTEM_PROMPT);
  // Each fold step carries the running notes (at most maxTokens) besides its chunk.
  const chunkTokens =
    request.window === null
      ? Number.POSITIVE_INFINITY
      : request.window - system - 2 * request.maxTokens - 2 * INSTRUCTION_TOKENS;
  if (chunkTokens < 256) throw new Error(`the summarizer's window (${request.window} tokens) leaves no room for a transcript chunk`);
  const chunks = chunkTranscript(rendered, chunkTokens, tokensOfText);
  let notes = earlierNotes;
  for (const [index, chunk] of chunks.entries()) {
    request.onProgress?.({ messages: messages.length, chunk: index + 1, chunks: chunks.length });
    notes = await callForNotes(
      call,
      prependBody(request, prependRequestText({ transcript: chunk, earlierNotes: notes, part: { index: index + 1, count: chunks.length } })),
      request.signal,
    );
  }
  if (notes === null) throw new Error('there was nothing to summarize');
  return notes;
}

/**
 * Notes for `candidate[head, cut)`: suffix mode, then prepend mode when suffix
 * fails, answers without text, or cannot fit. Throws a {@link SummaryError}
 * when both fail; the caller falls back as configured.
 */
export async function summarize(request: SummarizeRequest, call: ChatCall): Promise<SummaryResult> {
  let calls = 0;
  const counted: ChatCall = (body, signal) => {
    calls++;
    return call(body, signal);
  };
  let suffixFailure: unknown;
  try {
    const suffix = await summarizeSuffix(request, counted);
    if (suffix !== null) return { ...suffix, calls };
  } catch (error) {
    if (request.signal.aborted) throw new SummaryError('the summary was cancelled', calls, error);
    suffixFailure = error;
  }
  try {
    const notes = await summarizePrepend(request, counted);
    return { notes, mode: 'prepend', calls };
  } catch (error) {
    const reason = failureReason(error);
    const first = suffixFailure === undefined ? '' : `; suffix mode: ${failureReason(suffixFailure)}`;
    throw new SummaryError(`the summary could not be written: ${reason}${first}`, calls, error);
  }
}
