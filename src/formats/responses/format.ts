import type { ChatRequestBody } from '../chat/read.js';
import { outputLimitOf } from '../../transcript/request-view.js';
import { readJsonObject, withModelNameChecked } from '../json-body.js';
import { wirePairs } from '../pairs.js';
import type { WireFormat } from '../wire-format.js';
import { RESPONSES_STREAM_END } from './stream.js';
import { responsesErrorBody, responsesErrorEvent } from './errors.js';
import { checkResponsesBody, inputIndexOf, responsesView } from './read.js';
import { responsesBytesFor } from './write.js';
import { checkPlanningItems } from '../planning-cap.js';

/** The OpenAI Responses API (Codex CLI): the chat view made by read.ts, written back by write.ts. */
export const RESPONSES_FORMAT: WireFormat = {
  urls: ['/v1/responses'],
  streamEnd: RESPONSES_STREAM_END,
  listKey: 'input',
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
      maxOutputTokens: outputLimitOf(body, ['max_output_tokens']),
      stream: view.stream,
      ...(untouched === undefined ? {} : { untouched }),
      bytesFor: (bytes, messages) => responsesBytesFor(bytes, view, messages),
    };
  },
  errorBody: responsesErrorBody,
  errorEvent: responsesErrorEvent,
};
