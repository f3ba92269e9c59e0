import type { SummaryPlace, TierName } from './types.js';

/**
 * The engine's ports: what it calls out through (the summary call, the
 * logger) and what it tells whoever watches it, so it stays free of the
 * upstream client, the HTTP server and any metrics library.
 */

/** Request headers for a call made on a client's behalf: its `authorization`, when no upstream key is configured. */
export type CallHeaders = Readonly<Record<string, string>>;

/**
 * Sends one non-streamed chat completion upstream and returns its parsed JSON
 * (or throws). `headers` carry the client's credential when the upstream has no key of its own.
 */
export type ChatCall = (body: Record<string, unknown>, signal: AbortSignal, headers?: CallHeaders, slot?: SummarySlot) => Promise<unknown>;

/**
 * Where on a llama-server with slots a summary call runs (src/slots/): a
 * suffix call on its conversation's slot (its prompt extends what that slot
 * holds), a prepend call on nobody's (it shares no prefix with anyone).
 * `grown`: a suffix call's body over a longer history its slot holds by the
 * time the call gets it (a turn of the conversation ran there meanwhile),
 * asking for the same notes; undefined when that history is not the
 * candidate's continuation or would not fit.
 */
export type SummarySlot = ({ readonly kind: 'summary'; readonly key: string; readonly grown?: GrownBody } | { readonly kind: 'guest' }) & { readonly place?: SummaryPlace };

/** See {@link SummarySlot}'s `grown`. */
export type GrownBody = (history: readonly ChatMessage[]) => Record<string, unknown> | undefined;


/** Where the engine writes its report lines; the server's logger in production. */
export interface CompactionLogger {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
}

/**
 * What the compaction engine tells whoever watches it (the metrics): a seam,
 * so the engine stays free of any metrics library. Every call is made on the
 * request path or right after a summary, so an observer must be cheap and
 * must not throw.
 */

import type { ChatMessage } from '../transcript/message.js';
/**
 * How it ended: `compacted` (a new epoch, applied now), `prepared` (a new
 * epoch computed in the background, pending), `truncated`, `forwarded` (the
 * summary failed and the history went as it was), `failed` (the summary
 * failed: an error for the client, or a background epoch not made),
 * `too-large` (400 `context_length_exceeded`), `observed` (observe mode:
 * what would have been done, counted per request, nothing done).
 */
export type CompactionOutcome = 'compacted' | 'prepared' | 'truncated' | 'forwarded' | 'failed' | 'too-large' | 'observed';

/**
 * One compaction, counted once where its work was done (never by each request
 * that waited for it or that came within a failure's back-off).
 */
export interface CompactionEvent {
  /** The model of the request (as the client named it). */
  readonly model: string;
  /** The tier tried; null when none could be (`too-large`: even the last turn cannot fit). */
  readonly tier: TierName | null;
  readonly outcome: CompactionOutcome;
  /** The size of the history as the client sent it (tokens, with the learned ratio). */
  readonly tokensBefore: number;
  /** The size of what is forwarded after it; meaningful for the outcomes that made an epoch (compacted, prepared, truncated). */
  readonly tokensAfter: number;
  /** Computed in the background, ahead of need. */
  readonly pending: boolean;
  /** The epoch made, told where it was written (in the background too), for the dashboard; absent when none was. */
  readonly written?: WrittenEpoch;
}

/** An epoch as it was written: whose conversation, its report line, how long it took, its notes. */
export interface WrittenEpoch {
  readonly tenant: string;
  /** The history it was written for, and its prefix hashes (`hashes[i]` names its first `i` messages). */
  readonly messages: readonly ChatMessage[];
  readonly hashes: readonly string[];
  readonly report: string;
  readonly milliseconds: number;
  /** The summary's notes (message text: shown only with `dashboard.show_text`); null for a pruning or a truncation. */
  readonly notes: string | null;
}

export interface SummaryEvent {
  readonly milliseconds: number;
  readonly outcome: 'ok' | 'failed' | 'timeout';
  /** Upstream calls it made (chunks of a folded summary, and fallbacks, count one each). */
  readonly calls: number;
}

export interface CompactionObserver {
  compaction(event: CompactionEvent): void;
  summary(event: SummaryEvent): void;
  /** A request past the fast path looked for an epoch of its conversation. */
  epochLookup(hit: boolean): void;
  /**
   * A request waited for a summary (its own, or one already running for its
   * conversation) before it could be forwarded: `milliseconds` in all. A
   * crossing whose epoch was prepared in the background waits for none.
   */
  summaryWait?(milliseconds: number): void;
  /** A summary was dropped from the queue or refused a place in it, by the limit named. */
  summaryDropped?(limit: string): void;
}
