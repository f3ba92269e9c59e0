/** The Anthropic Messages API (Claude Code) as a wire format: its read on the skeleton (the chat view made by read.ts, written back by write.ts) and its adapter's fields. */

import type { WireFormat } from '../wire-format.js';
import { type WireReader, readWire } from '../read-wire.js';
import { MESSAGES_STREAM_END } from './stream.js';
import { MESSAGES_USAGE } from './usage.js';
import { anthropicErrorBody, anthropicErrorEvent } from './errors.js';
import { type MessagesView, checkMessagesBody, messagesViewSteps, wireIndexOf } from './read.js';
import { messagesPartsFor } from './write.js';
import { CONTEXT_MANAGEMENT_KEY, readContextManagement } from './context-management.js';
import { messagesAnswerEditor, pausedCompactionAnswer } from './answer-edits.js';

type CheckedBody = Parameters<typeof messagesViewSteps>[0];

const MESSAGES_READER: WireReader<CheckedBody, MessagesView> = {
  check: (body) => {
    checkMessagesBody(body);
    return body;
  },
  view: messagesViewSteps,
  wireIndexOf,
  messagesAsParsed: false,
  partsFor: messagesPartsFor,
  edits: readContextManagement,
  editsKey: CONTEXT_MANAGEMENT_KEY,
};

export const MESSAGES_FORMAT: WireFormat = {
  urls: ['/v1/messages'],
  listKey: 'messages',
  streamEnd: MESSAGES_STREAM_END,
  usage: MESSAGES_USAGE,
  outputLimitFields: ['max_tokens'],
  // Anthropic's clients send their key as `x-api-key` (Claude Code with ANTHROPIC_AUTH_TOKEN as `Authorization: Bearer`).
  credentialHeaders: ['authorization', 'x-api-key'],
  // llama-server's /v1/messages is not known to read `id_slot`.
  pinsSlots: false,
  read: (input) => readWire(MESSAGES_FORMAT, MESSAGES_READER, input),
  // Anthropic's count answers what the edits leave, and the history as sent (docs.claude.com, "Context editing": count tokens).
  countTokensUrls: ['/v1/messages/count_tokens'],
  countAnswer: (body, original, edited) => ({ ...body, input_tokens: edited, context_management: { original_input_tokens: original } }),
  answerEditor: messagesAnswerEditor,
  pausedAnswer: pausedCompactionAnswer,
  errorBody: anthropicErrorBody,
  errorEvent: anthropicErrorEvent,
};
