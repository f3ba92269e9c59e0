import type { ChatMessage } from '../../transcript/message.js';
import { contentText } from '../../transcript/message.js';
import { isMarked } from '../../transcript/marks.js';
import { callForNotes } from './notes.js';
import { keptFilesOf, openingWords, suffixInstruction } from './prompt.js';
import { suffixRequestBody } from './request-body.js';
import type { ChatCall, GrownBody, SummarySlot } from '../ports.js';
import type { SummarizeRequest } from '../types.js';

/**
 * Suffix mode: the whole candidate, as compactor would forward it, plus one
 * instruction that quotes the first kept message. Its prompt is a prefix of
 * what the upstream already holds in its KV cache, so the summary costs
 * almost no prompt processing; and on a single-slot server the slot still
 * holds the conversation afterwards. Only when that cannot fit the window is
 * the candidate cut at the cut (`suffix-cut`).
 *
 * A background summary can wait for its slot while its conversation's next
 * turns run there; the slot then holds the longer history, and the summary
 * as written would read none of it, nor would the next turn read anything
 * past where the summary's prompt left off. So the call's slot is offered
 * the same ask over the longer history (`grown`): the candidate and the
 * turns after it, then the same instruction, which names the old part by
 * its first kept message and so asks for the same notes.
 */

/** Whether a request of `size` tokens (its instruction included) leaves room for the notes. */
function fits(request: SummarizeRequest, size: number): boolean {
  return request.window === null || size + request.maxTokens <= request.window;
}

/** Whether `history` starts with every message of `candidate`: the same objects, or the same JSON (a later request parsed anew). */
function continues(history: readonly ChatMessage[], candidate: readonly ChatMessage[]): boolean {
  if (history.length <= candidate.length) return false;
  return candidate.every((message, index) => history[index] === message || JSON.stringify(history[index]) === JSON.stringify(message));
}

/**
 * The suffix body over a history that continues the candidate. Only with
 * compactor's own instruction that names the first kept message: a
 * deployment's instructions, or a candidate with nothing kept, may speak of
 * everything above, and would then take in the newer turns too.
 */
function grownBody(request: SummarizeRequest, instruction: ChatMessage): GrownBody | undefined {
  if (request.instructions !== undefined || request.candidate[request.cut] === undefined) return undefined;
  return (history) => {
    if (!continues(history, request.candidate)) return undefined;
    const whole = [...history, instruction];
    return fits(request, request.sizeOfMessages(whole, true)) ? suffixRequestBody(request, whole) : undefined;
  };
}

/**
 * Notes in suffix mode, or null when neither the whole candidate nor the cut one fits the window. Throws when the
 * call fails or answers without text. `slot`: where the call runs, given the grown body when there is one.
 */
export async function summarizeSuffix(
  request: SummarizeRequest,
  call: ChatCall,
  slot?: SummarySlot,
): Promise<{ notes: string; mode: 'suffix' | 'suffix-cut' } | null> {
  // Only where an epoch put them: a client's text that starts like a mark is no earlier notes.
  const hasEarlierNotes = [...request.marked].some((index) => {
    const message = request.candidate[index];
    return index >= request.head && index < request.cut && message !== undefined && (isMarked(message, 'summary') || isMarked(message, 'steps'));
  });
  const kept = request.candidate[request.cut];
  const instruction: ChatMessage = {
    role: 'user',
    content: request.instructions ?? suffixInstruction({ keptOpening: kept === undefined ? null : openingWords(contentText(kept.content)) || '(no text)', hasEarlierNotes, ...keptFilesOf(request) }),
  };
  const whole: ChatMessage[] = [...request.candidate, instruction];
  if (fits(request, request.sizeOfMessages(whole, true))) {
    request.onProgress?.({ messages: request.cut - request.head, chunk: 1, chunks: 1 });
    const grown = slot?.kind === 'summary' ? grownBody(request, instruction) : undefined;
    const where = slot?.kind === 'summary' && grown !== undefined ? { ...slot, grown } : slot;
    return { notes: await callForNotes(call, suffixRequestBody(request, whole), request.signal, where), mode: 'suffix' };
  }
  const cutOnly: ChatMessage[] = [
    ...request.candidate.slice(0, request.cut),
    { role: 'user', content: request.instructions ?? suffixInstruction({ keptOpening: null, hasEarlierNotes, ...keptFilesOf(request) }) },
  ];
  if (fits(request, request.sizeOfMessages(cutOnly, true))) {
    request.onProgress?.({ messages: request.cut - request.head, chunk: 1, chunks: 1 });
    return { notes: await callForNotes(call, suffixRequestBody(request, cutOnly), request.signal, slot), mode: 'suffix-cut' };
  }
  return null;
}
