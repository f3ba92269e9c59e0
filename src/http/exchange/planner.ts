import type { ConversationPrint } from '../../compaction/epochs/known-prefixes.js';
import type { PrefixPrint } from '../ledger/prefix-print.js';
import type { WallTimes } from '../../upstream/server-speeds.js';
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import type { ChatRequestBody, WireFormat } from '../../formats/registry.js';
import type { AnswerEdits, ContextEdits } from '../../transcript/context-edits.js';
import type { ChatMessage } from '../../transcript/message.js';
import type { PairProblem } from '../../transcript/pairs.js';
import type { OutputLimit } from '../../transcript/request-view.js';
import type { Timings, Usage } from '../../upstream/usage.js';

/**
 * The seam between the chat route (parse, pairs, forward, stream back) and
 * the compaction engine. The route calls `planner` once per request after
 * pair handling and before forwarding, and `onUsage` once the answer has been
 * streamed to the client.
 */

export interface ChatContext {
  /** The request after pair handling (the parsed client body when pairs changed nothing). */
  readonly body: ChatRequestBody;
  /**
   * The bytes the client sent; forwarded as they are when nothing changes the
   * body. Read them while planning: once the request was forwarded they are
   * let go of (empty), so a long stream does not hold them.
   */
  readonly raw: Buffer;
  /** The client's limit on the answer, read from its own API's field (`max_tokens`, `max_completion_tokens`, `max_output_tokens`). */
  readonly maxOutputTokens: OutputLimit | undefined;
  /** Whether pair handling changed `body` (repairs were made). */
  readonly changed: boolean;
  /** `raw`, when `body.messages` is exactly what its top-level `messages` parses to (CompactionInput.sourceBytes). */
  readonly sourceBytes?: Buffer | undefined;
  /** The repairs made (mode `repair`); empty otherwise. */
  readonly pairRepairs: readonly PairProblem[];
  /**
   * The tenant the key check found: a short hash of the client's key when
   * `auth.keys` is set, else ''. Not the tenant keys are made with: that is
   * `tenantOfRequest(context)` (src/http/edge/tenant.ts), which falls back
   * to the client's credential.
   */
  readonly keyTenant: string;
  /** The request's mode (`x-compactor-mode`, else `compaction.mode`); a planner that compacts honours observe. */
  readonly mode?: 'off' | 'observe' | 'compact';
  /** The client's request headers. They hold credentials: never log them. */
  readonly headers: IncomingHttpHeaders;
  /** The wire format the request came in (src/formats/): which header holds the client's key, among the rest. */
  readonly format: WireFormat;
  /** Aborted when the client goes away; pass it to upstream calls made for this request. */
  readonly signal: AbortSignal;
  readonly log: FastifyBaseLogger;
  /** Whether the client asked for a streamed answer. */
  readonly streamed?: boolean;
  /** The edits the client asks of its context (Anthropic's `context_management`), when it sent some. */
  readonly edits?: ContextEdits | undefined;
  /** The llama-server slot the request went to (upstream.slots); null when not pinned or not yet sent. */
  readonly slot?: number | null;
  /**
   * Sends an SSE comment (`: compacting 84 messages`) to a `stream: true`
   * client while it waits. The first call commits status 200 and the SSE
   * headers; from then on an error reaches the client as an SSE error event
   * and the report as a last comment. Returns false, doing nothing, when the
   * request is not streamed, `compaction.progress` is off, or the client left.
   */
  progress(comment: string): boolean;
}

/** What the planner decided. `undefined` means: forward the body as it is. */
export interface ChatPlan {
  /**
   * The body to forward instead, with a new Content-Length. Only its
   * `messages` is sent: it replaces the client's in the client's bytes, and
   * every other field goes as the client wrote it (a big `seed` would not
   * survive a round trip through a JS number).
   */
  readonly body?: Readonly<Record<string, unknown>>;
  /** One ASCII line for the `x-compactor` header (`summarized 84 messages -> …`). */
  readonly report?: string;
  /**
   * The size in tokens of the history as the client sent it, when the
   * report states it: the metrics and the dashboard count this same number
   * as sent, so the figures agree with the header.
   */
  readonly clientTokens?: number;
  /**
   * Called for this request only, as {@link ChatHooks.onUsage} is: where a
   * planner keeps what it needs to learn from the answer. (Kept in a WeakMap
   * keyed by the context, it cost ~5% of the proxy's CPU: the young-generation
   * collector holds a WeakMap's values alive, so every request's body was
   * copied twice and promoted to the old generation.)
   */
  readonly onUsage?: UsageHook;
  /** What the request's context edits add to its answer (`applied_edits`, a `compaction` block), or make of it (a paused compaction). */
  readonly answerEdits?: AnswerEdits;
}

/**
 * Plans the forwarded request. To refuse it, throw a `ProxyError` (from
 * `src/errors.ts`): its status and OpenAI-shaped body go to the client.
 */
export type ChatPlanner = (context: ChatContext) => Promise<ChatPlan | undefined>;

/**
 * What the readers at an answer's end (the usage hooks, the prompt-token
 * counters, the dashboard, the error counts) need of a chat request, taken
 * when it is read and forwarded. Nothing here refers to the parsed body or
 * its messages array: a request in flight or an idle stream would otherwise
 * keep a whole parsed 200 KB body alive until its answer ends, which at 32
 * requests in flight was ~6 MB of young-generation garbage kept alive and
 * copied by every scavenge (issue 26).
 */
export interface ReadFigures {
  readonly tenant: string;
  readonly model: string;
  /**
   * The client's history named and digested (KnownPrefixes.printOf): the
   * chain up to its first real user message (the dashboard's conversation
   * id, the ledger's key) and each message's digest (the ledger's). No
   * message: the client's own are not held.
   */
  readonly print: ConversationPrint;
  /** How many messages the client sent, and how many of them were real user turns. */
  readonly messages: number;
  readonly turns: number;
}

export interface RequestFigures extends ReadFigures {
  /** Whether the forwarded body differs from what the client sent. */
  readonly changed: boolean;
  /**
   * The bytes/4 estimates of the client's request and of the forwarded one
   * (messages and tools), made only when they differ: the prompt tokens the
   * upstream counted are scaled by their ratio.
   */
  readonly estimates?: { readonly client: number; readonly forwarded: number } | undefined;
  readonly repairs: readonly PairProblem[];
  /** The llama-server slot the request went to, if pinned. */
  readonly slot: number | null;
  /** The fleet server that answered (its label, upstream.servers); absent with one server. */
  readonly upstream?: string;
  /** The digests the prefix-break ledger compares (prefix-print.ts): no text. */
  readonly prefix?: PrefixPrint;
}

export interface UsageObservation {
  /** The request's figures, taken when it was forwarded (no parsed body is kept until the answer ends). */
  readonly request: RequestFigures;
  /** Its size in bytes as sent. */
  readonly forwardedBytes: number;
  /** The line `x-compactor` carried (pairs and compaction), if any. */
  readonly report?: string | undefined;
  /** The planner's size of the history as the client sent it (see {@link ChatPlan.clientTokens}). */
  readonly clientTokens?: number | undefined;
  readonly status: number;
  readonly streamed: boolean;
  /** The last `usage` the answer carried (a streamed answer has it with `stream_options.include_usage`). */
  readonly usage: Usage | undefined;
  /** llama-server's `timings` (`cache_n`, `prompt_n`, …), when present. */
  readonly timings: Timings | undefined;
  /** A streamed answer's wall times (to its first byte, then to its last): the server's speeds where it sends no timings. */
  readonly wall?: WallTimes | undefined;
}

/**
 * Called once after a 2xx answer was streamed whole to the client, whether
 * or not it carried `usage`; a good moment to start background work. Errors
 * it throws are logged and otherwise ignored.
 */
export type UsageHook = (observation: UsageObservation) => void;

/**
 * The upstream refused the forwarded prompt as larger than its context of
 * `window` tokens (llama-server's 400 `exceed_context_size_error`). Resolves
 * true when the planner has learned that window (it is smaller than the one
 * it planned with) and planning again is worth one more request: nothing was
 * generated, so sending again is safe.
 */
export type RefusalHook = (context: ChatContext, window: number) => Promise<boolean>;

export interface ChatHooks {
  readonly planner?: ChatPlanner;
  readonly onUsage?: UsageHook;
  readonly onRefusal?: RefusalHook;
}
