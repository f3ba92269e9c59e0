import { UpstreamStatusError } from '../../errors.js';
import type { ChatCall } from '../ports.js';
import type { SummarizeRequest } from '../types.js';
import { summarizePrepend } from './prepend.js';
import { summarizeSuffix } from './suffix.js';

/**
 * Writing the notes that replace old messages: suffix mode first
 * (suffix.ts), prepend mode when that fails, answers without text, or cannot
 * fit (prepend.ts). The request bodies are in request-body.ts, the prompt
 * text in prompt.ts, reading the notes out of an answer in notes.ts, and the
 * chunking for a prepend-mode fold in chunks.ts.
 */

export interface SummaryResult {
  readonly notes: string;
  readonly mode: 'suffix' | 'suffix-cut' | 'prepend';
  /** Upstream calls made, failed ones included. */
  readonly calls: number;
}

export class SummaryError extends Error {
  constructor(
    message: string,
    readonly calls: number,
    override readonly cause?: unknown,
  ) {
    super(message);
    this.name = 'SummaryError';
  }
}

/** An upstream error type worth naming: an identifier (`exceed_context_size_error`), not free text. */
const ERROR_TYPE = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * Why a summary call failed, in words that may be logged and shown to a
 * client. An upstream's error message can quote the prompt (llama-server's
 * JSON errors quote what they could not parse: "last read: '…'"), so an
 * error status is named by its status and error type only. (Not
 * upstream/client.ts's `failureReason`, which names a failed connection.)
 */
function describeSummaryFailure(error: unknown): string {
  if (error instanceof UpstreamStatusError) {
    const body = error.upstreamBody;
    const inner = typeof body === 'object' && body !== null && 'error' in body ? body.error : undefined;
    const type = typeof inner === 'object' && inner !== null && 'type' in inner ? inner.type : undefined;
    return `the upstream answered ${error.status}${typeof type === 'string' && ERROR_TYPE.test(type) ? ` (${type})` : ''}`;
  }
  return error instanceof Error ? error.message : String(error);
}

/**
 * Notes for `candidate[head, cut)`: suffix mode, then prepend mode when suffix
 * fails, answers without text, or cannot fit. Throws a {@link SummaryError}
 * when both fail; the caller falls back as configured.
 */
export async function summarize(request: SummarizeRequest, call: ChatCall): Promise<SummaryResult> {
  let calls = 0;
  const { slotKey, place } = request;
  const where = place === undefined ? {} : { place };
  // The slot is named only with a conversation key; suffix mode adds what its body becomes over a grown history.
  const counted: ChatCall = (body, signal, _headers, slot) => {
    calls++;
    return slotKey === undefined ? call(body, signal) : call(body, signal, undefined, slot);
  };
  let suffixFailure: unknown;
  try {
    const suffix = await summarizeSuffix(request, counted, { kind: 'summary', key: slotKey ?? '', ...where });
    if (suffix !== null) return { ...suffix, calls };
  } catch (error) {
    if (request.signal.aborted) throw new SummaryError('the summary was cancelled', calls, error);
    suffixFailure = error;
  }
  try {
    const notes = await summarizePrepend(request, (body, signal) => counted(body, signal, undefined, { kind: 'guest', ...where }));
    return { notes, mode: 'prepend', calls };
  } catch (error) {
    const reason = describeSummaryFailure(error);
    const first = suffixFailure === undefined ? '' : `; suffix mode: ${describeSummaryFailure(suffixFailure)}`;
    throw new SummaryError(`the summary could not be written: ${reason}${first}`, calls, error);
  }
}
