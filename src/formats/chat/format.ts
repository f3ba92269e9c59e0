import type { WireFormat } from '../wire-format.js';
import { CHAT_STREAM_END } from './stream.js';
import { handlePairs } from '../pairs.js';
import { chatErrorBody, chatErrorEvent } from './errors.js';
import { chatOutputLimit, readChatRequest } from './read.js';
import { chatBytesFor } from './write.js';
import { checkPlanningItems } from '../planning-cap.js';

/** OpenAI's chat completions: the chat view is the body itself. */
export const CHAT_FORMAT: WireFormat = {
  urls: ['/v1/chat/completions', '/chat/completions'],
  streamEnd: CHAT_STREAM_END,
  listKey: 'messages',
  *read(raw, contentType, pairs, observe = false, maxItems = Number.POSITIVE_INFINITY) {
    const parsed = readChatRequest(raw, contentType);
    checkPlanningItems(parsed.messages, maxItems);
    return { pairs: yield* handlePairs(parsed, pairs, observe), maxOutputTokens: chatOutputLimit(parsed), stream: parsed['stream'] === true, messagesAsParsed: true, bytesFor: chatBytesFor };
  },
  errorBody: chatErrorBody,
  errorEvent: chatErrorEvent,
};
