import type { ContextEdits } from '../../transcript/context-edits.js';
import type { ChatMessage } from '../../transcript/message.js';
import type { RequestView } from '../../transcript/request-view.js';
import type { Budget } from '../policy/budget.js';
import type { CallHeaders } from '../ports.js';

/**
 * What the engine is asked (one chat request), what it works from past the
 * fast path, and what it answers (what to forward).
 */

export interface CompactionInput {
  /** The request as the engine reads it, whatever its wire format: model, history (after pair handling), tools, the answer's limit. */
  readonly request: RequestView;
  /** Names the client's credential; epochs are never shared across tenants. */
  readonly tenant: string;
  /**
   * The client's body, when `request.messages` is exactly what its top-level
   * `messages` parses to (a chat completions body whose pairs needed no
   * repair): the engine proves a history repeats an earlier request's by its
   * bytes rather than hash it again (epochs/known-prefixes.ts).
   */
  readonly sourceBytes?: Buffer | undefined;
  /** Aborts when the client goes away. */
  readonly signal: AbortSignal;
  /** Told while the request waits for a summary (`compacting 84 messages (chunk 2/3)`). */
  readonly onProgress?: (line: string) => void;
  /** Headers for the upstream calls made for this request (the client's credential when no upstream key is set). */
  readonly upstreamHeaders?: CallHeaders | undefined;
  /**
   * compact (the default): rewrite what must be. observe: decide once and only
   * say what would be done (no wait, no summary, no epoch written). force
   * (`POST /v1/compact` with `"force": true`): compact whenever there is
   * something old to summarize.
   */
  readonly mode?: 'compact' | 'observe' | 'force';
  /**
   * The edits the client asks of its context (Anthropic's `context_management`):
   * decided by the tiers they map onto (policy/context-edits.ts).
   */
  readonly edits?: ContextEdits | undefined;
}

export interface Compacted {
  /** What to forward: the input array itself when nothing changed. */
  readonly messages: ChatMessage[];
  readonly changed: boolean;
  /** The compaction line for logs and the `x-compactor` header, or null. */
  readonly report: string | null;
  /** The bytes/4 estimate of the forwarded prompt, before any ratio: what the upstream's count is learned against. */
  readonly estimate: number;
  /** Work to start once the answer has been streamed (the next epoch, prepared in the background). */
  readonly afterResponse?: () => void;
  /** Whether an epoch was written for this request (new), one already written was applied (reused), or neither (none). */
  readonly epoch: 'new' | 'reused' | 'none';
  /**
   * The size of the history as the client sent it, before any pruning
   * (estimate times the learned ratio): the "before" of the report, and what
   * the metrics and the dashboard count as sent. Absent with compaction off.
   */
  readonly clientTokens?: number;
  /** The notes of the summary the forwarded prompt starts from, when it starts from one (an epoch's, new or reused). */
  readonly notes?: string;
  /** The tier of the epoch written for this request (`epoch: 'new'`), or `truncated`. */
  readonly tier?: string;
}

/** The one way a {@link Compacted} is made: named fields, `changed` derived from the input's own array. */
export function compactedOf(
  input: Pick<CompactionInput, 'request'>,
  fields: {
    messages: ChatMessage[];
    report: string | null;
    estimate: number;
    afterResponse?: (() => void) | undefined;
    epoch?: Compacted['epoch'];
    notes?: string | null | undefined;
    tier?: string | undefined;
  },
): Compacted {
  const { messages, report, estimate, afterResponse, epoch = 'none', notes, tier } = fields;
  return {
    messages,
    changed: messages !== input.request.messages,
    report,
    estimate,
    epoch,
    ...(afterResponse === undefined ? {} : { afterResponse }),
    ...(notes === undefined || notes === null ? {} : { notes }),
    ...(tier === undefined ? {} : { tier }),
  };
}

/** What a compaction needs to know of its request. */
export interface CompactionRequest {
  /** The prefix hash chain of the history as the client sent it. */
  readonly hashes: readonly string[];
  /** Whose conversation it is: ratios are learned per tenant. */
  readonly tenant: string;
  /** The history after oversized results were pruned. */
  readonly messages: ChatMessage[];
  readonly body: Readonly<Record<string, unknown>>;
  readonly model: string;
  readonly budget: Budget;
  /** The bytes/4 estimate of the request's tool definitions. */
  readonly toolsEstimate: number;
  /** The size of the history as the client sent it (tokens, with the learned ratio). */
  readonly originalSize: number;
  readonly headers: CallHeaders | undefined;
  /** The summary prompt the client gave for this request (`compact_20260112`'s `instructions`), in place of compactor's. */
  readonly summaryInstructions?: string | undefined;
}

/**
 * What a summary epoch of this request is written from, and so keyed by: the
 * whole history (a suffix-mode request is the whole candidate, a prefix of
 * what the upstream's slot holds; the epoch in use it starts from was itself
 * written from a prefix of this history). Also its single-flight key.
 */
export function seenWhole(request: Pick<CompactionRequest, 'hashes' | 'messages'>): { seenLength: number; key: string } {
  const seenLength = request.messages.length;
  return { seenLength, key: request.hashes[seenLength]! };
}

/**
 * The request as a background summary keeps it while it waits for a slot
 * (up to `summary.max_queued_background` of them): without the body's own
 * `messages`, which no summary call reads (it sends the candidate), and
 * which hold the client's originals of every oversized result pruned away.
 * What the call needs stays: the candidate's messages, the hashes, the
 * body's other fields (tools, sampling: the same prompt as the client's),
 * the headers.
 */
export function keptForLater(request: CompactionRequest): CompactionRequest {
  if (!('messages' in request.body)) return request;
  const { messages: _sent, ...body } = request.body;
  return { ...request, body };
}
