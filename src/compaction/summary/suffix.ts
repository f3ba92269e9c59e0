import type { ChatMessage } from '../../transcript/message.js';
import { contentText } from '../../transcript/message.js';
import { isMarked } from '../../transcript/marks.js';
import { callForNotes } from './notes.js';
import { keptFilesOf, openingWords, suffixInstruction } from './prompt.js';
import { suffixRequestBody } from './request-body.js';
import type { ChatCall } from '../ports.js';
import type { SummarizeRequest } from '../types.js';

/**
 * Suffix mode: the whole candidate, as compactor would forward it, plus one
 * instruction that quotes the first kept message. Its prompt is a prefix of
 * what the upstream already holds in its KV cache, so the summary costs
 * almost no prompt processing; and on a single-slot server the slot still
 * holds the conversation afterwards. Only when that cannot fit the window is
 * the candidate cut at the cut (`suffix-cut`).
 */

/** Whether a request of `size` tokens (its instruction included) leaves room for the notes. */
function fits(request: SummarizeRequest, size: number): boolean {
  return request.window === null || size + request.maxTokens <= request.window;
}

/** Notes in suffix mode, or null when neither the whole candidate nor the cut one fits the window. Throws when the call fails or answers without text. */
export async function summarizeSuffix(
  request: SummarizeRequest,
  call: ChatCall,
): Promise<{ notes: string; mode: 'suffix' | 'suffix-cut' } | null> {
  // Only where an epoch put them: a client's text that starts like a mark is no earlier notes.
  const hasEarlierNotes = [...request.marked].some((index) => {
    const message = request.candidate[index];
    return index >= request.head && index < request.cut && message !== undefined && (isMarked(message, 'summary') || isMarked(message, 'steps'));
  });
  const kept = request.candidate[request.cut];
  const whole: ChatMessage[] = [
    ...request.candidate,
    {
      role: 'user',
      content: request.instructions ?? suffixInstruction({ keptOpening: kept === undefined ? null : openingWords(contentText(kept.content)) || '(no text)', hasEarlierNotes, ...keptFilesOf(request) }),
    },
  ];
  if (fits(request, request.sizeOfMessages(whole, true))) {
    request.onProgress?.({ messages: request.cut - request.head, chunk: 1, chunks: 1 });
    return { notes: await callForNotes(call, suffixRequestBody(request, whole), request.signal), mode: 'suffix' };
  }
  const cutOnly: ChatMessage[] = [
    ...request.candidate.slice(0, request.cut),
    { role: 'user', content: request.instructions ?? suffixInstruction({ keptOpening: null, hasEarlierNotes, ...keptFilesOf(request) }) },
  ];
  if (fits(request, request.sizeOfMessages(cutOnly, true))) {
    request.onProgress?.({ messages: request.cut - request.head, chunk: 1, chunks: 1 });
    return { notes: await callForNotes(call, suffixRequestBody(request, cutOnly), request.signal), mode: 'suffix-cut' };
  }
  return null;
}
