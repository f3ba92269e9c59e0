import type { ChatMessage } from '../transcript/message.js';
import type { Decision } from './policy/decide.js';
import type { Candidate } from './policy/plan.js';
import type { CompactionRequest } from './request.js';
import type { SummaryResult } from './summary/summarize.js';

/** The decisions that write an epoch with a summary call (the epoch writer's). */
export type SummaryDecision = Extract<Decision, { kind: 'summary' | 'steps' }>;

export interface WriteOptions {
  readonly signal: AbortSignal;
  readonly onProgress: ((line: string) => void) | undefined;
  /** Computed in the background: stored pending, and a failure leaves nothing behind. */
  readonly pending: boolean;
  /** Stored in use even when computed in the background: it replaces a truncation, which is never waited out. */
  readonly inUse?: boolean;
}

/** What one write works from. */
export interface WriteJob {
  readonly request: CompactionRequest;
  readonly candidate: Candidate;
  readonly decision: SummaryDecision;
  readonly options: WriteOptions;
  /** The epoch's key: the whole history its summary sees. */
  readonly key: string;
  readonly seenLength: number;
  /** What a failure's back-off is kept by. */
  readonly conversation: string;
  readonly started: number;
  /** Size in real tokens of messages, with the ratio as learned when the write began. */
  readonly sizeOfMessages: (messages: readonly ChatMessage[], withTools: boolean) => number;
  /** The candidate's messages after the cut's boundary: forwarded after the replacement. */
  readonly rest: readonly ChatMessage[];
  readonly earlierNotes: string | null;
  readonly marked: number[];
}

export type CallOutcome =
  | { readonly kind: 'written'; readonly result: SummaryResult; readonly callStarted: number }
  | { readonly kind: 'dropped' }
  | { readonly kind: 'failed'; readonly failure: string; readonly timedOut: boolean };
