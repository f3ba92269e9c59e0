import type { ProxyError } from '../errors.js';
import type { AnswerEdits, ContextEdits } from '../transcript/context-edits.js';
import type { ChatMessage } from '../transcript/message.js';
import type { OutputLimit, OutputLimitField } from '../transcript/request-view.js';
import type { Slices } from '../transcript/slices.js';
import type { StreamEnd } from '../upstream/sse.js';
import type { UsageWords } from '../upstream/usage.js';
import type { PairMode, PairOutcome } from './pairs.js';
import type { ParsedAhead } from './parse-ahead.js';

/**
 * What a wire format (an API compactor serves) is to the rest of compactor:
 * the whole adapter. Each one is a folder of src/formats/ with the same
 * files (read.ts: the body into the chat view; write.ts: only what changed,
 * spliced into the client's bytes; stream.ts: how its stream ends or fails;
 * usage.ts: what its answer says it cost; errors.ts: compactor's errors in
 * its own shape; format.ts: this interface put together), and one line in
 * registry.ts. Outside src/formats/ nothing asks which format a request
 * came in: it reads the fields below.
 */

/** What a format's read is given: the client's body and how to handle its pairs. */
export interface ReadInput {
  /** The client's bytes (a Buffer; anything else is refused as an empty body). */
  readonly raw: unknown;
  readonly contentType: string | undefined;
  readonly pairs: PairMode;
  /** Observe mode: pairs are checked and reported, never repaired or refused. */
  readonly observe: boolean;
  /** `limits.max_items`: more messages, tool calls and content parts than this are refused with a 413. */
  readonly maxItems: number;
  /** The body parsed ahead of the read, when it was large (parse-ahead.ts): the read takes it rather than parsing again. */
  readonly parsedAhead?: ParsedAhead | undefined;
}

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
  /**
   * The same bytes as parts, in order, not joined: a large body's write-back
   * is mostly the client's own bytes of what it kept (parse-ahead.ts), and
   * the caller joins them a slice per turn of the loop (issue 34).
   */
  partsFor(raw: Buffer, messages: readonly ChatMessage[]): readonly Buffer[];
  /** The edits the client asks of its context (Anthropic's `context_management`), when its API has them and it sent some. */
  readonly edits?: ContextEdits;
  /**
   * Set when the body holds a field only compactor reads (Anthropic's
   * `context_management`: no local server knows it): the bytes to forward
   * without it. Absent: the bytes go as they are.
   */
  readonly forwardable?: (bytes: Buffer) => Buffer;
}

/** An answer with a request's context edits added (Anthropic's `applied_edits`, a `compaction` block): pure text in, text out. */
export interface AnswerEditor {
  /** A JSON answer with the edits; anything else (an error body) as it came. */
  json(text: string): string;
  /** Each SSE frame (`event: …\ndata: …`, without its blank line) as the edits make it: one frame, several, or the same. */
  frame(frame: string): string;
}

/**
 * Opens one item a client carries for the server (the Responses API's
 * `compaction` item, issue 38): the chat messages it stands for. Throws a
 * 400 naming `param` when the item is not one compactor sealed.
 */
export type CarriedOpener = (sealed: unknown, param: string) => readonly ChatMessage[];

export interface WireFormat {
  /** The paths it is served at. */
  readonly urls: readonly string[];
  /** The top-level key of the conversation list (`messages`; `input` for the Responses API): a large body is parsed ahead by its elements (parse-ahead.ts). */
  readonly listKey: string;
  /** How its stream ends properly besides `data: [DONE]`, and what an error event inside it looks like (stream.ts; read by upstream/sse.ts). */
  readonly streamEnd: StreamEnd;
  /** Where its answers say what they cost, and in which words (usage.ts; read by upstream/usage.ts). */
  readonly usage: UsageWords;
  /** The fields its clients limit the answer with, in its own words; the largest one set counts, and the 400 that names it advises lowering it. */
  readonly outputLimitFields: readonly OutputLimitField[];
  /**
   * The headers its clients send their key in, the first one present wins:
   * `authorization` is passed on as it is, any other holds the bare key and
   * goes as `Bearer <key>` on compactor's own calls for the request (a
   * summary, a count), which go through chat completions.
   */
  readonly credentialHeaders: readonly string[];
  /** Whether the server's route for it reads llama-server's `id_slot`, so a conversation can be sent to its home slot (src/slots/). */
  readonly pinsSlots: boolean;
  /** The body read into the chat view, pairs handled (read-wire.ts): as steps, run at once for an ordinary body, a slice at a time for a large one. */
  read(input: ReadInput): Slices<ReadRequest>;
  /**
   * The client's bytes with each item it carries for the server replaced,
   * before the read, by the messages `open` gives for it (the Responses API's
   * `compaction` items; absent: the format has none). A body carrying none
   * comes back as it came.
   */
  openCarried?(raw: Buffer, contentType: string | undefined, open: CarriedOpener): { readonly raw: Buffer; readonly opened: number };
  /** Whether the body asks for a compaction rather than an answer (the Responses API's `compaction_trigger` item; absent: the format has none). */
  asksCompaction?(raw: unknown, contentType: string | undefined): boolean;
  /** Where its API counts a request's tokens (Anthropic's `/v1/messages/count_tokens`), when it has such a route and context edits. */
  readonly countTokensUrls?: readonly string[];
  /** A count's answer with what the edits leave (`edited`) and the history as sent (`original`), in its API's words. */
  countAnswer?(upstreamBody: Record<string, unknown>, original: number, edited: number): unknown;
  /** How its answers carry a request's context edits, when its API has them (ReadRequest.edits). */
  answerEditor?(edits: AnswerEdits): AnswerEditor;
  /** The answer to a request whose edits pause after a compaction (the model not asked): its body, JSON or a whole stream. */
  pausedAnswer?(edits: AnswerEdits & { compaction: string }, model: string, id: string, streamed: boolean): string;
  /** compactor's error as this API's JSON error body. */
  errorBody(error: ProxyError): unknown;
  /** compactor's error as this API's stream error event. */
  errorEvent(error: ProxyError): string;
}
