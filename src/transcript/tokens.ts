import { type ChatMessage } from './message.js';

/**
 * Token estimates: one heuristic everywhere, ⌊UTF-8 bytes / 4⌋.
 *
 * It under-counts code and JSON and over-counts CJK: it is a trigger, not a
 * meter. The proxy multiplies it by a ratio learned per model from the
 * upstream's `usage.prompt_tokens`, and asks for an exact count near a
 * threshold, so the heuristic only has to be cheap and stable.
 */

/** Bytes per token of the heuristic: the usual rule of thumb for English text with BPE vocabularies. */
export const BYTES_PER_TOKEN = 4;

/**
 * Tokens a chat template spends around each message (role header, separators,
 * end-of-turn token). Four is what ChatML-style templates (Qwen, llama-server's
 * default) spend: `<|im_start|>`, the role, a newline, `<|im_end|>`.
 */
export const FRAMING_TOKENS_PER_MESSAGE = 4;

/**
 * Tokens counted for a content part that is not text (an image, an audio clip).
 * Its bytes are a base64 data URL or a link, which the model never sees as
 * text, so they are not counted; instead a fixed cost stands for what the
 * projector emits. 256 is Gemma 3's fixed cost per image in llama.cpp and in the
 * range of Qwen2-VL's for a small picture; the learned ratio corrects the rest.
 */
export const MEDIA_PART_TOKENS = 256;

/**
 * UTF-8 byte length of a string. A lone surrogate counts 3 bytes, as it does
 * once encoded (as U+FFFD).
 */
export function utf8ByteLength(text: string): number {
  // Buffer.byteLength is native and runs at memory speed on multi-megabyte tool results.
  return Buffer.byteLength(text, 'utf8');
}

function tokensOfBytes(bytes: number): number {
  return Math.floor(bytes / BYTES_PER_TOKEN);
}

/**
 * ⌊UTF-8 bytes / 4⌋ of a text; `null` and `undefined` count 0.
 *
 * Guarantees: never negative; for well-formed `a` and `b`,
 * `estimateTokens(a + b)` is `estimateTokens(a) + estimateTokens(b)` or one
 * more (the remainders of the two divisions may add up to a token).
 *
 * @example
 * estimateTokens('Hello world') // → 2
 * estimateTokens('antidisestablishmentarianism') // → 7
 * estimateTokens(null) // → 0
 */
export function estimateTokens(text: string | null | undefined): number {
  if (text === null || text === undefined || text === '') return 0;
  return tokensOfBytes(utf8ByteLength(text));
}

/** What a message costs: text bytes, and fixed tokens for its non-text parts. */
interface MessageCost {
  readonly bytes: number;
  readonly mediaTokens: number;
}

/**
 * The bytes a message carries as text: its content's text parts (all of them,
 * not only the first), each call's id, name and arguments, and its
 * `tool_call_id`. Other fields (`name`, `reasoning_content`, provider extras)
 * are not counted: templates mostly drop them from past messages.
 */
function costOf(message: ChatMessage): MessageCost {
  let bytes = 0;
  let mediaTokens = 0;
  const { content } = message;
  if (typeof content === 'string') {
    bytes += utf8ByteLength(content);
  } else if (Array.isArray(content)) {
    for (const part of content) {
      const text = part['text'];
      if (part.type === 'text') {
        if (typeof text === 'string') bytes += utf8ByteLength(text);
      } else {
        mediaTokens += MEDIA_PART_TOKENS;
      }
    }
  }
  // Read tool_calls on any role: a call the upstream renders costs tokens whoever carries it.
  if (Array.isArray(message.tool_calls)) {
    for (const call of message.tool_calls) {
      bytes += utf8ByteLength(call.id) + utf8ByteLength(call.function.name);
      if (typeof call.function.arguments === 'string') bytes += utf8ByteLength(call.function.arguments);
    }
  }
  if (typeof message.tool_call_id === 'string') bytes += utf8ByteLength(message.tool_call_id);
  return { bytes, mediaTokens };
}

/**
 * The size of one message as part of a request: its text bytes / 4 (content,
 * call ids, names and arguments, `tool_call_id`), plus {@link MEDIA_PART_TOKENS}
 * per non-text content part, plus {@link FRAMING_TOKENS_PER_MESSAGE}.
 *
 * Guarantee: additive. For any request,
 * `sum(estimateMessageTokens(m)) + estimateToolsTokens(tools) === estimateRequestTokens(request)`,
 * so the size of a range of messages is the sum of its messages' sizes.
 *
 * @example
 * estimateMessageTokens({ role: 'user', content: 'Hello world' }) // → 6 (2 + 4 of framing)
 */
export function estimateMessageTokens(message: ChatMessage): number {
  const { bytes, mediaTokens } = costOf(message);
  return tokensOfBytes(bytes) + mediaTokens + FRAMING_TOKENS_PER_MESSAGE;
}

/**
 * The text of all messages (content text, call ids, names and arguments,
 * `tool_call_id`), summed in bytes and divided once; no framing, no media
 * parts. Because it divides once it can exceed the sum of per-message
 * estimates by less than one token per message: use it for a quick measure of
 * text, and {@link estimateMessageTokens} / {@link estimateRequestTokens} for
 * sizes that must add up.
 *
 * @example
 * estimateMessagesTokens([{ role: 'user', content: 'Hello' }, { role: 'assistant', content: 'Hi there' }]) // → 3
 */
export function estimateMessagesTokens(messages: readonly ChatMessage[]): number {
  let bytes = 0;
  for (const message of messages) bytes += costOf(message).bytes;
  return tokensOfBytes(bytes);
}

/**
 * The size of a request's tool definitions: the bytes of their JSON / 4
 * (templates render the definitions as JSON, close to this text). Absent or
 * `null` tools count 0.
 *
 * @example
 * estimateToolsTokens([{ type: 'function', function: { name: 'bash' } }]) // → 12
 */
export function estimateToolsTokens(tools: unknown): number {
  if (tools === undefined || tools === null) return 0;
  const json = JSON.stringify(tools) as string | undefined;
  return json === undefined ? 0 : estimateTokens(json);
}

/** The parts of a chat request that take room in the prompt. */
export interface TokenEstimateRequest {
  readonly messages: readonly ChatMessage[];
  /** The request's `tools` as sent (any JSON); absent or `null` counts nothing. */
  readonly tools?: unknown;
}

/**
 * The size of a request before the learned ratio: every message's
 * {@link estimateMessageTokens} plus {@link estimateToolsTokens} of its tools.
 *
 * Guarantee: exactly that sum (see {@link estimateMessageTokens}), so the
 * compaction engine may size ranges of messages separately and add them.
 *
 * @example
 * estimateRequestTokens({ messages: [{ role: 'user', content: 'Hello world' }] }) // → 6
 */
export function estimateRequestTokens(request: TokenEstimateRequest): number {
  let tokens = estimateToolsTokens(request.tools);
  for (const message of request.messages) tokens += estimateMessageTokens(message);
  return tokens;
}
