import type { ProxyError } from '../errors.js';
import type { ChatMessage } from '../transcript/message.js';
import type { OutputLimit } from '../transcript/request-view.js';
import type { Steps } from '../transcript/steps.js';
import type { PairMode, PairOutcome } from './pairs.js';

/**
 * What a wire format (an API compactor serves) is to the exchange: each one
 * is a folder of src/formats/ with the same files (read.ts: the body into
 * the chat view; write.ts: only what changed, spliced into the client's
 * bytes; stream.ts: how its stream ends; errors.ts: compactor's errors in
 * its own shape; format.ts: this
 * interface put together), and one line in registry.ts.
 */

export interface ReadRequest {
  /** The chat view after pair handling. */
  readonly pairs: PairOutcome;
  /** The client's limit on the answer, read from its own API's field. */
  readonly maxOutputTokens: OutputLimit | undefined;
  readonly stream: boolean;
  /** Whether the chat view's `messages` are the body's own top-level `messages` as parsed (chat completions), before pair handling. */
  readonly messagesAsParsed?: boolean;
  /** Set when the request goes upstream as it came, unplanned: why, for `x-compactor`. */
  readonly untouched?: string;
  /** The client's bytes with its conversation rewritten from the chat messages the core returned. */
  bytesFor(raw: Buffer, messages: readonly ChatMessage[]): Buffer;
}

/** How a stream of the format ends properly besides `data: [DONE]`: its final events' names, and a data line that ends it. */
export interface StreamEnd {
  readonly events: ReadonlySet<string>;
  readonly data?: RegExp;
}

export interface WireFormat {
  /** The paths it is served at. */
  readonly urls: readonly string[];
  readonly streamEnd: StreamEnd;
  /** The top-level key of the conversation list (`messages`; `input` for the Responses API): a large body is parsed ahead by its elements (parse-ahead.ts). */
  readonly listKey: string;
  /**
   * `observe`: pairs are checked and reported, never repaired or refused (observe mode).
   * `maxItems` (`limits.max_items`): more messages, tool calls and content parts than this are refused with a 413.
   * As steps (transcript/steps.ts): run at once for an ordinary body, a slice at a time for a large one.
   */
  read(raw: unknown, contentType: string | undefined, pairs: PairMode, observe?: boolean, maxItems?: number): Steps<ReadRequest>;
  /** compactor's error as this API's JSON error body. */
  errorBody(error: ProxyError): unknown;
  /** compactor's error as this API's stream error event. */
  errorEvent(error: ProxyError): string;
}
