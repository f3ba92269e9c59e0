/** OpenAI's chat completions as a wire format: its read on the skeleton (the chat view is the body itself) and its adapter's fields. */

import type { WireFormat } from '../wire-format.js';
import { type WireReader, type WireView, readWire } from '../read-wire.js';
import { CHAT_STREAM_END } from './stream.js';
import { CHAT_USAGE } from './usage.js';
import { chatErrorBody, chatErrorEvent } from './errors.js';
import { CHAT_OUTPUT_LIMIT_FIELDS, type ChatRequestBody, checkChatBody } from './read.js';
import { chatPartsFor } from './write.js';

// The view is the body itself: each chat message is its own wire message.
const CHAT_READER: WireReader<ChatRequestBody, WireView> = {
  check: checkChatBody,
  *view(body) {
    return { chat: body };
  },
  wireIndexOf: (_chat, index) => index,
  messagesAsParsed: true,
  partsFor: (raw, _view, messages, parsedAhead) => chatPartsFor(raw, messages, parsedAhead),
};

export const CHAT_FORMAT: WireFormat = {
  urls: ['/v1/chat/completions', '/chat/completions'],
  listKey: 'messages',
  streamEnd: CHAT_STREAM_END,
  usage: CHAT_USAGE,
  outputLimitFields: CHAT_OUTPUT_LIMIT_FIELDS,
  // OpenAI's clients send `Authorization: Bearer`; a key sent as `x-api-key` (Anthropic's header) is read too, as on every route before formats said their own.
  credentialHeaders: ['authorization', 'x-api-key'],
  // llama-server's /v1/chat/completions reads `id_slot`.
  pinsSlots: true,
  read: (input) => readWire(CHAT_FORMAT, CHAT_READER, input),
  errorBody: chatErrorBody,
  errorEvent: chatErrorEvent,
};
