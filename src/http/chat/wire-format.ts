import { InvalidRequestError, type ProxyError, sseErrorEvent } from '../../errors.js';
import { anthropicErrorBody, anthropicErrorEvent } from '../../formats/errors.js';
import { checkMessagesBody, messagesFromView, messagesView, wireIndexOf } from '../../formats/messages.js';
import { checkResponsesBody, inputIndexOf, itemsFromView, responsesView } from '../../formats/responses.js';
import type { ChatMessage } from '../../transcript/message.js';
import { describePairProblem, findPairProblems } from '../../transcript/pairs.js';
import type { ChatRequestBody } from './planner.js';
import { type PairOutcome, applyPairMode, observePairMode, readChatRequest, readJsonObject, withModelNameChecked } from './request.js';
import { spliceInput, spliceMessages } from './splice-messages.js';
import { checkPlanningItems } from './planning-cap.js';

/**
 * The wire formats one chat exchange serves: chat completions, and the
 * Anthropic Messages API through its adapter (src/formats/messages.ts). Each
 * reads its body into the chat view the pairs and the planner work on, says
 * how the messages the planner returns go back into the client's bytes
 * (only `messages` is spliced: every other byte as it came), and words
 * compactor's errors in its own shape.
 */

export type PairMode = 'repair' | 'reject' | 'off';

export interface FormatRequest {
  /** The chat view after pair handling. */
  readonly pairs: PairOutcome;
  readonly stream: boolean;
  /** Set when the request goes upstream as it came, unplanned: why, for `x-compactor`. */
  readonly untouched?: string;
  /** The client's bytes with `messages` rewritten from the chat messages the core returned. */
  bytesFor(raw: Buffer, messages: readonly ChatMessage[]): Buffer;
}

export interface WireFormat {
  /**
   * `observe`: pairs are checked and reported, never repaired or refused (observe mode).
   * `maxItems` (`limits.max_items`): more messages, tool calls and content parts than this are refused with a 413.
   */
  read(raw: unknown, contentType: string | undefined, pairs: PairMode, observe?: boolean, maxItems?: number): FormatRequest;
  /** compactor's error as this API's JSON error body. */
  errorBody(error: ProxyError): unknown;
  /** compactor's error as this API's stream error event. */
  errorEvent(error: ProxyError): string;
}

export const CHAT_FORMAT: WireFormat = {
  read(raw, contentType, pairs, observe = false, maxItems = Number.POSITIVE_INFINITY) {
    const parsed = readChatRequest(raw, contentType);
    checkPlanningItems(parsed.messages, maxItems);
    return { pairs: handlePairs(parsed, pairs, observe), stream: parsed['stream'] === true, bytesFor: spliceMessages };
  },
  errorBody: (error) => error.toBody(),
  errorEvent: sseErrorEvent,
};

/** Pairs repaired (or refused) as `mode` says; in observe mode only checked, and what would be done reported. */
function handlePairs(chat: ChatRequestBody, mode: PairMode, observe: boolean): PairOutcome {
  return observe ? observePairMode(chat, mode) : applyPairMode(chat, mode);
}

/**
 * Pairs of a view made from another wire format: handled as the chat view's,
 * except that `pairs: reject` names the wire message (or input item) at
 * `key`, not the chat view's message.
 */
function wirePairs(
  chat: ChatRequestBody,
  mode: PairMode,
  observe: boolean,
  key: string,
  indexOf: (messages: readonly ChatMessage[], index: number) => number | undefined,
): PairOutcome {
  if (mode !== 'reject' || observe) return handlePairs(chat, mode, observe);
  const first = findPairProblems(chat.messages)[0];
  if (first === undefined) return handlePairs(chat, 'off', false);
  const wire = `${key}[${indexOf(chat.messages, first.index) ?? 0}]`;
  throw new InvalidRequestError({ code: 'invalid_tool_pairs', message: describePairProblem(first).replace(/^messages\[\d+\]/, wire), param: wire });
}

export const MESSAGES_FORMAT: WireFormat = {
  read(raw, contentType, pairs, observe = false, maxItems = Number.POSITIVE_INFINITY) {
    const body = readJsonObject(raw, contentType);
    checkMessagesBody(body);
    checkPlanningItems(body.messages, maxItems);
    withModelNameChecked(body);
    const view = messagesView(body);
    const chat = view.chat as ChatRequestBody;
    return {
      pairs: wirePairs(chat, pairs, observe, 'messages', wireIndexOf),
      stream: view.stream,
      bytesFor: (bytes, messages) => spliceMessages(bytes, messagesFromView(view, messages)),
    };
  },
  errorBody: anthropicErrorBody,
  errorEvent: anthropicErrorEvent,
};

/** A Responses stream's error event: `event: error` with the error's fields (what the openai SDK reads). */
function responsesErrorEvent(error: ProxyError): string {
  return `event: error\ndata: ${JSON.stringify({ type: 'error', code: error.code, message: error.message, param: error.param })}\n\n`;
}

export const RESPONSES_FORMAT: WireFormat = {
  read(raw, contentType, pairs, observe = false, maxItems = Number.POSITIVE_INFINITY) {
    const body = readJsonObject(raw, contentType);
    checkResponsesBody(body);
    checkPlanningItems((body as Record<string, unknown>)['input'], maxItems);
    withModelNameChecked(body);
    const view = responsesView(body);
    const chat = view.chat as ChatRequestBody;
    const untouched = view.untouched ?? (chat.messages.length === 0 ? 'passed through: no input' : undefined);
    const mode = untouched === undefined ? pairs : 'off';
    return {
      pairs: wirePairs(chat, mode, observe, 'input', inputIndexOf),
      stream: view.stream,
      ...(untouched === undefined ? {} : { untouched }),
      bytesFor: (bytes, messages) => spliceInput(bytes, itemsFromView(view, messages)),
    };
  },
  errorBody: (error) => error.toBody(),
  errorEvent: responsesErrorEvent,
};
