/** The OpenAI Responses API (Codex CLI) as a wire format: its read on the skeleton (the chat view made by read.ts, written back by write.ts) and its adapter's fields. */

import type { WireFormat } from '../wire-format.js';
import { type WireReader, readWire } from '../read-wire.js';
import { RESPONSES_STREAM_END } from './stream.js';
import { RESPONSES_USAGE } from './usage.js';
import { responsesErrorBody, responsesErrorEvent } from './errors.js';
import { type ResponsesView, checkResponsesBody, inputIndexOf, responsesView } from './read.js';
import { responsesBytesFor } from './write.js';
import { asksCompaction, openCompactionItems } from './compaction-item.js';

type CheckedBody = Parameters<typeof responsesView>[0];

const RESPONSES_READER: WireReader<CheckedBody, ResponsesView> = {
  check: (body) => {
    checkResponsesBody(body);
    return body;
  },
  // Made at once (one pass over the input items); the pair passes after it run in slices.
  *view(body) {
    const view = responsesView(body);
    // Nothing to compact: the request goes as it came.
    return view.untouched === undefined && view.chat.messages.length === 0 ? { ...view, untouched: 'passed through: no input' } : view;
  },
  wireIndexOf: inputIndexOf,
  messagesAsParsed: false,
  partsFor: (raw, view, messages) => [responsesBytesFor(raw, view, messages)],
};

export const RESPONSES_FORMAT: WireFormat = {
  urls: ['/v1/responses'],
  listKey: 'input',
  streamEnd: RESPONSES_STREAM_END,
  usage: RESPONSES_USAGE,
  outputLimitFields: ['max_output_tokens'],
  // Kept as on every route before formats said their own: OpenAI's clients send `Authorization: Bearer`.
  credentialHeaders: ['authorization', 'x-api-key'],
  // llama-server's /v1/responses is not known to read `id_slot`.
  pinsSlots: false,
  read: (input) => readWire(RESPONSES_FORMAT, RESPONSES_READER, input),
  // Its `compaction` items (from /v1/responses/compact) are compactor's own: opened into the summary pair before the read.
  openCarried: openCompactionItems,
  // A request whose input ends in a `compaction_trigger` is answered by compactor's compaction (http/exchange/responses-compact.ts).
  asksCompaction,
  errorBody: responsesErrorBody,
  errorEvent: responsesErrorEvent,
};
