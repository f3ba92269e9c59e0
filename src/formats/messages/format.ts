import type { ChatRequestBody } from '../chat/read.js';
import { outputLimitOf } from '../../transcript/request-view.js';
import { readJsonObject, withModelNameChecked } from '../json-body.js';
import { wirePairs } from '../pairs.js';
import type { WireFormat } from '../wire-format.js';
import { MESSAGES_STREAM_END } from './stream.js';
import { anthropicErrorBody, anthropicErrorEvent } from './errors.js';
import { checkMessagesBody, messagesView, wireIndexOf } from './read.js';
import { messagesBytesFor } from './write.js';
import { checkPlanningItems } from '../planning-cap.js';

/** The Anthropic Messages API (Claude Code): the chat view made by read.ts, written back by write.ts. */
export const MESSAGES_FORMAT: WireFormat = {
  urls: ['/v1/messages'],
  streamEnd: MESSAGES_STREAM_END,
  listKey: 'messages',
  read(raw, contentType, pairs, observe = false, maxItems = Number.POSITIVE_INFINITY) {
    const body = readJsonObject(raw, contentType);
    checkMessagesBody(body);
    checkPlanningItems(body.messages, maxItems);
    withModelNameChecked(body);
    const view = messagesView(body);
    return {
      pairs: wirePairs(view.chat as ChatRequestBody, pairs, observe, 'messages', wireIndexOf),
      maxOutputTokens: outputLimitOf(body, ['max_tokens']),
      stream: view.stream,
      bytesFor: (bytes, messages) => messagesBytesFor(bytes, view, messages),
    };
  },
  errorBody: anthropicErrorBody,
  errorEvent: anthropicErrorEvent,
};
