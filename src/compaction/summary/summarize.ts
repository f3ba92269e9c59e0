import { UpstreamStatusError } from '../../errors.js';
import type { ChatMessage } from '../../transcript/message.js';
import type { CallHeaders } from '../upstream-json.js';
import { summarizePrepend } from './prepend.js';
import { summarizeSuffix } from './suffix.js';

/**
 * Writing the notes that replace old messages: suffix mode first
 * (suffix.ts), prepend mode when that fails, answers without text, or cannot
 * fit (prepend.ts). The request bodies are in request-body.ts, the prompt
 * text in prompt.ts, reading the notes out of an answer in notes.ts, and the
 * chunking for a prepend-mode fold in chunks.ts.
 */

/**
 * Sends one non-streamed chat completion upstream and returns its parsed JSON
 * (or throws). `headers` carry the client's credential when the upstream has no key of its own.
 */
export type ChatCall = (body: Record<string, unknown>, signal: AbortSignal, headers?: CallHeaders, slot?: SummarySlot) => Promise<unknown>;

/**
 * Where on a llama-server with slots a summary call runs (src/slots/): a
 * suffix call on its conversation's slot (its prompt extends what that slot
 * holds), a prepend call on nobody's (it shares no prefix with anyone).
 */
export type SummarySlot = { readonly kind: 'summary'; readonly key: string } | { readonly kind: 'guest' };

export interface SummarizeRequest {
  /** The client's request body: model, tools and template fields come from it. */
  readonly body: Readonly<Record<string, unknown>>;
  /** What compactor would forward (an earlier epoch applied). */
  readonly candidate: readonly ChatMessage[];
  /** The old part is `candidate[head, cut)`. */
  readonly head: number;
  readonly cut: number;
  /** The candidate indexes where compactor's marks are genuine (where an epoch's replacement put them); anything else that looks marked is a client's text. */
  readonly marked: ReadonlySet<number>;
  /** Notes of the epoch the candidate starts from, merged rather than re-summarized. */
  readonly earlierNotes: string | null;
  /** The summarizer's window in tokens; null when unknown (then every request is tried as it is). */
  readonly window: number | null;
  /** Size in real tokens of messages sent with the request's tools (ratio applied). */
  readonly sizeOfMessages: (messages: readonly ChatMessage[], withTools: boolean) => number;
  readonly model: string;
  readonly maxTokens: number;
  readonly systemPrompt?: string;
  readonly signal: AbortSignal;
  readonly onProgress?: (progress: SummaryProgress) => void;
  /** The conversation's home-slot key, when the upstream's slots are scheduled. */
  readonly slotKey?: string;
}

export interface SummaryProgress {
  readonly messages: number;
  readonly chunk: number;
  readonly chunks: number;
}

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
  const { slotKey } = request;
  const countedOn =
    (slot: SummarySlot): ChatCall =>
    (body, signal) => {
      calls++;
      return slotKey === undefined ? call(body, signal) : call(body, signal, undefined, slot);
    };
  const counted = countedOn({ kind: 'summary', key: slotKey ?? '' });
  let suffixFailure: unknown;
  try {
    const suffix = await summarizeSuffix(request, counted);
    if (suffix !== null) return { ...suffix, calls };
  } catch (error) {
    if (request.signal.aborted) throw new SummaryError('the summary was cancelled', calls, error);
    suffixFailure = error;
  }
  try {
    const notes = await summarizePrepend(request, countedOn({ kind: 'guest' }));
    return { notes, mode: 'prepend', calls };
  } catch (error) {
    const reason = describeSummaryFailure(error);
    const first = suffixFailure === undefined ? '' : `; suffix mode: ${describeSummaryFailure(suffixFailure)}`;
    throw new SummaryError(`the summary could not be written: ${reason}${first}`, calls, error);
  }
}
