import { z } from 'zod';
import { ChatMessageSchema, type ChatMessage } from '../transcript/message.js';

/**
 * The words compaction's rooms share (policy/, epochs/, summary/, the
 * engine): types, the epoch's schema and the one moving average, importing
 * nothing but the transcript's message and zod, so any file of compaction/
 * can use them without importing another room.
 */

/**
 * The name of the tier a compaction was made by (policy/tiers/list.ts lists
 * them: prune, compress, summary, steps). A string, not a union: the list is
 * the one place tiers are named, and an engine may be given another.
 */
export type TierName = string;

/**
 * "The first `sourceLength` original messages of this conversation are
 * forwarded as `replacement`", for a history that begins with the first
 * `seenLength` messages its text was written from (whose prefix hash is `key`).
 *
 * The one definition of an epoch: the type is inferred from it, and a value
 * read from a shared store is checked by it (epochs/stored-epoch.ts), every
 * length a count within the history, every index within the replacement.
 * Its fields are the JSON fields every version has stored (`pending` is never
 * in the JSON: a stored value's flag byte says it, epochs/epoch-codec.ts).
 */
export const EpochSchema = z
  .strictObject({
    /** The prefix hash of the first `seenLength` original messages: `hashes[seenLength]`. */
    key: z.string().regex(/^[\w-]{16,128}$/, 'not a prefix hash'),
    sourceLength: z.number().int().nonnegative(),
    /**
     * How many original messages the replacement's text was written from
     * (≥ `sourceLength`): a suffix-mode summary sees the whole history, kept
     * turns included, and may carry them, so the epoch applies only to a
     * history that contains everything its summary request saw. A growing
     * conversation keeps it; a branch (an edited or regenerated message,
     * another user sharing a preamble) does not.
     */
    seenLength: z.number().int().positive(),
    replacement: z.array(ChatMessageSchema).readonly(),
    /**
     * The indexes of `replacement` that compactor wrote (the summary pair, a
     * truncation notice, the message leading with steps notes): the only
     * places a mark is genuine. Absent: none. Text elsewhere that starts like a
     * mark is a client's, and ordinary content.
     */
    marked: z.array(z.number().int().nonnegative()).readonly().exactOptional(),
    /** The notes text, kept so a later epoch merges from it without parsing messages; null when there are none. */
    notes: z.string().nullable(),
    /**
     * The tier that made the epoch, or `truncated` when its summary failed
     * (the field keeps its stored name). The built-in tiers' names
     * (policy/tiers/list.ts `STORED_TIERS`, checked equal by
     * test/extension-points.test.ts): this file is below the list's room.
     */
    strategy: z.enum(['prune', 'compress', 'summary', 'steps', 'truncated']),
    /** The line that reported the compaction that made this epoch. */
    report: z.string(),
    /** Milliseconds since the epoch (clock) after which the entry is dropped early (truncations retry the summary). */
    expiresAt: z.number().finite().exactOptional(),
    /**
     * Prepared in the background and not applied yet: the raw turns are
     * forwarded as long as they fit, and the first request that crosses the
     * threshold applies this epoch with no waiting.
     */
    pending: z.boolean().exactOptional(),
  })
  .refine((epoch) => epoch.sourceLength <= epoch.seenLength, 'sourceLength is beyond seenLength')
  .refine((epoch) => (epoch.marked ?? []).every((index) => index < epoch.replacement.length), 'a marked index is outside the replacement');

export type Epoch = Readonly<z.infer<typeof EpochSchema>>;

/** How the history before an epoch's cut is forwarded: by a tier, or truncated when its summary failed. */
export type EpochStrategy = Epoch['strategy'];

/** What a history's prefix hashes find: the epoch in use of the longest prefix that has one, and the longest pending epoch beyond it. */
export interface EpochLookup {
  readonly inUse: Epoch | null;
  readonly pending: Epoch | null;
  /** A shared store did not answer (down, or slower than its bound): this is what this process's memory knows. */
  readonly degraded?: true;
  /**
   * A shared store: another replica holds the lease on a prefix of this
   * history beyond the epoch in use (it computes the conversation's next
   * epoch), named by the lease. Absent when there is a pending epoch.
   */
  readonly runningElsewhere?: string;
}

export interface LookupOptions {
  /**
   * Wait longer than the store's usual bound: asked before writing a summary
   * that an answer not given in time led to (a summary costs seconds, and
   * would not be written by a replica that got the answer).
   */
  readonly patient?: boolean;
}

/** The right to compute the epoch of one key, held by one replica at a time (see `leased`). */
export interface EpochLease {
  /** Extends the lease while the summary runs; false when it was lost (expired and taken). */
  renew(): Promise<boolean>;
  release(): Promise<void>;
}

/**
 * Weight of a new token-ratio measure: a few requests are enough to follow a
 * change of model, one odd request is not. The one constant here: the
 * learned ratios (token-ratio.ts) and a shared store's merge of every
 * replica's measures (epochs/redis-learning.ts) must average alike.
 */
export const LEARNING_WEIGHT = 0.3;

/** Ratios outside this range come from a mismatched measure (another model, a cached count), not a tokenizer. */
export const RATIO_RANGE = { min: 0.5, max: 4 } as const;

/** The moving average after `samples`, in order, by {@link LEARNING_WEIGHT}; the first measure replaces a missing average outright. */
export function movingAverage(previous: number | undefined, samples: readonly number[]): number | undefined {
  let value = previous;
  for (const sample of samples) value = value === undefined ? sample : value + LEARNING_WEIGHT * (sample - value);
  return value;
}

/** A (tenant, model) pair's measures not yet given to the shared store, in the order they were taken. */
export interface UnsharedMeasures {
  readonly tenant: string;
  readonly model: string;
  readonly samples: readonly number[];
}

/**
 * A summary's place in the summary queue as its slot sees it (issue 33 item
 * 2): the summary gives its concurrency place back while it waits for a
 * slot and takes one again once it holds the slot, so a summary parked
 * behind a busy slot never keeps another one from its free slot; and a
 * background summary whose wait for a slot ran out is dropped.
 */
export interface SummaryPlace {
  /** Prepared ahead of need (it may be dropped), not waited for by a request. */
  readonly background: boolean;
  /** Runs `wait` (the wait for a slot) without the concurrency place, then takes a place again, before every summary that has not begun. */
  aside<T>(wait: () => Promise<T>): Promise<T>;
  /** Its wait for a slot ran out: the summary is dropped (the next crossing decides again), and waits for no slot again. */
  expire(): void;
}

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
  /** Paths of the files kept verbatim after the notes (the working set the cut takes): the prompt says so, and their text needs no notes. */
  readonly keptFiles?: readonly string[];
  /** The summarizer's window in tokens; null when unknown (then every request is tried as it is). */
  readonly window: number | null;
  /** Size in real tokens of messages sent with the request's tools (ratio applied). */
  readonly sizeOfMessages: (messages: readonly ChatMessage[], withTools: boolean) => number;
  readonly model: string;
  readonly maxTokens: number;
  readonly systemPrompt?: string;
  /**
   * The client's own summary prompt (Anthropic's `compact_20260112`
   * `instructions`): it replaces compactor's ask in suffix mode and its
   * system prompt in prepend mode, as Anthropic documents it.
   */
  readonly instructions?: string;
  readonly signal: AbortSignal;
  readonly onProgress?: (progress: SummaryProgress) => void;
  /** The conversation's home-slot key, when the upstream's slots are scheduled. */
  readonly slotKey?: string;
  /** The summary's place in the summary queue, given back while a call waits for its slot (ports.ts). */
  readonly place?: SummaryPlace;
}

export interface SummaryProgress {
  readonly messages: number;
  readonly chunk: number;
  readonly chunks: number;
}

