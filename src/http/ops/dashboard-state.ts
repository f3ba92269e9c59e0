import { budgetOf } from '../../compaction/policy/budget.js';
import { BUILT_IN_TIERS, TRUNCATED, tierNamed } from '../../compaction/policy/tiers/list.js';
import { type Config, modelSettingsOf } from '../../config/schema.js';
import type { CompactionEvent, CompactionObserver, SummaryEvent, WrittenEpoch } from '../../compaction/ports.js';
import { prefixHashes } from '../../compaction/epochs/prefix-hash.js';
import type { ConversationPrint } from '../../compaction/epochs/known-prefixes.js';
import { isMarked } from '../../transcript/marks.js';
import { isRealUserMessage } from '../../transcript/groups.js';
import { contentText, type ChatMessage } from '../../transcript/message.js';
import type { ReadFigures, UsageObservation } from '../exchange/planner.js';
import type { PromptTokens } from './metrics.js';
import type { PrefixBreak } from '../ledger/prefix-breaks.js';
import type { AnswerCost } from '../ledger/server-ledger.js';
import type { LearnedSpeed } from '../../upstream/server-speeds.js';

/**
 * What `GET /dashboard/state` shows: per conversation (a short id from the
 * hash of its first messages, never their text), its requests, turns,
 * client-sent vs forwarded tokens over its last requests, epochs by tier,
 * KV reuse from the upstream's own timings and pair repairs by kind; the
 * recent compactions with their one-line reports; and totals.
 *
 * Bounded whatever the traffic: the last `maxConversations` conversations
 * seen (the one seen longest ago is forgotten first), the last `maxEvents`
 * compactions, the last {@link POINTS_PER_CONVERSATION} requests of each,
 * and notes (kept only with `show_text`) cut at {@link MAX_NOTES_CHARS}.
 */

/** Requests drawn per conversation: a chart of 60 points is readable at 390 px wide. */
export const POINTS_PER_CONVERSATION = 60;
/** Notes of one epoch kept for the page (show_text): a 1024-token summary is about 4 KiB of text. */
export const MAX_NOTES_CHARS = 8_192;
/** Characters of the hash shown as the conversation's id: 8 hex digits, 4 billion ids. */
const ID_LENGTH = 8;

export interface Point {
  readonly at: number;
  readonly sent: number;
  readonly forwarded: number;
}

interface Conversation {
  readonly id: string;
  readonly tenant: string;
  readonly model: string;
  requests: number;
  /** Requests answered 4xx after they were read (the upstream's `exceed_context_size_error`, compactor's `context_length_exceeded`). */
  refused: number;
  /** Requests that failed with 5xx (an upstream unreachable, a timeout, a summary error). */
  failed: number;
  turns: number;
  messages: number;
  readonly points: Point[];
  epochs: number;
  reused: number;
  readonly tiers: Record<string, number>;
  saved: number;
  cached: number;
  prompt: number;
  readonly repairs: Record<string, number>;
  report: string | null;
  /** The llama-server slot of its last answer (upstream.slots), or null. */
  slot: number | null;
  lastAt: number;
  /** Server seconds: reading prompts, writing answers, and reading again what compactor's own changes broke (server-ledger.ts). */
  readonly server: { prefill: number; decode: number; reprocess: number };
  /** Its last {@link BREAKS_PER_CONVERSATION} prefix breaks: where (message index, tokens kept before) and why. */
  readonly breaks: BreakItem[];
}

/** One prefix break as the page shows it. */
export interface BreakItem extends PrefixBreak {
  readonly at: number;
}

/** Breaks kept per conversation: a long agent run breaks its prefix a few dozen times; the last 20 say where it stands. */
export const BREAKS_PER_CONVERSATION = 20;

export interface CompactionItem {
  readonly at: number;
  readonly conversation: string;
  readonly model: string;
  readonly tier: string;
  readonly report: string;
  /** How long the epoch took to write (its summary call, queue included). */
  readonly milliseconds: number;
  /** Written in the background, after an answer (prepared ahead of need). */
  readonly background: boolean;
  readonly notes?: string;
}

/** A chat request as the dashboard counts it: figures taken when it was read, never its whole history. */
export type ReadRequest = Pick<ReadFigures, 'tenant' | 'model' | 'print' | 'messages' | 'turns'>;

export interface AnsweredRequest extends ReadRequest {
  /** Whether the forwarded history differs from the client's (nothing was saved when it does not). */
  readonly changed: boolean;
  readonly report: string | undefined;
  readonly tokens: PromptTokens | null;
  readonly repairs: readonly { readonly kind: string }[];
  readonly slot?: number | null;
  /** What the server paid for it (server-ledger.ts). */
  readonly cost?: AnswerCost;
}

/** What the page reads of the server at request time: its learned speeds, and the summaries' seconds in all. */
/** One server of a fleet as the servers table shows it (issue 39). */
export interface FleetServerRow {
  readonly server: string;
  readonly up: boolean;
  readonly conversations: number;
  readonly queued: number;
  readonly slotsInUse: number;
  readonly requests: number;
  readonly failures: number;
}

export interface ServerSources {
  readonly speeds: () => readonly LearnedSpeed[];
  /** A fleet's servers (upstream.servers); absent with one server. */
  readonly servers?: () => readonly FleetServerRow[];
  readonly summarySeconds: () => { readonly prefill: number; readonly decode: number; readonly calls: number };
}

export interface DashboardStateOptions {
  readonly maxConversations: number;
  readonly maxEvents: number;
  readonly showText: boolean;
  readonly now?: () => number;
}

/** Where the conversation starts: its head and first real user message, hashed as epochs are (tenant and model first). */
function conversationId(tenant: string, model: string, messages: readonly ChatMessage[], hashes?: readonly string[]): string {
  const firstUser = messages.findIndex((message) => isRealUserMessage(message));
  const upTo = firstUser === -1 ? messages.length : firstUser + 1;
  // An epoch's request hashed its history already: the same chain, so the same id.
  const hash = hashes?.[upTo] ?? prefixHashes({ tenant, model }, messages, upTo).at(-1)!;
  return hash.slice(0, ID_LENGTH);
}

/** The same id, from the chain the request's read made (its head's link): not hashed again. */
function printedId(print: ConversationPrint): string {
  return print.hashes[print.head]!.slice(0, ID_LENGTH);
}

export class DashboardState implements CompactionObserver {
  // A Map keeps insertion order: deleting and setting again moves a conversation to the end, so the first is the one seen longest ago.
  readonly #conversations = new Map<string, Conversation>();
  readonly #events: (CompactionItem & { readonly tenant: string })[] = [];
  readonly #options: DashboardStateOptions;
  readonly #now: () => number;
  readonly totals = { requests: 0, refused: 0, failed: 0, tokensSaved: 0, summaryMs: 0, summaryCalls: 0, waits: 0, failures: 0, truncations: 0, observed: 0, serverPrefill: 0, serverDecode: 0, serverReprocess: 0 };
  #server: ServerSources | undefined;

  constructor(options: DashboardStateOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  /** Where the server's speeds and summary seconds are read (app.ts). */
  watch(sources: ServerSources): void {
    this.#server = sources;
  }

  get conversationCount(): number {
    return this.#conversations.size;
  }

  get eventCount(): number {
    return this.#events.length;
  }

  /** The conversation of that id, made when first seen, and moved to the end (seen last). */
  #conversation(tenant: string, model: string, id: string, at: number): Conversation {
    const key = `${tenant}\n${id}`;
    let conversation = this.#conversations.get(key);
    if (conversation === undefined) {
      conversation = { id, tenant, model, requests: 0, refused: 0, failed: 0, turns: 0, messages: 0, points: [], epochs: 0, reused: 0, tiers: {}, saved: 0, cached: 0, prompt: 0, repairs: {}, report: null, slot: null, lastAt: at, server: { prefill: 0, decode: 0, reprocess: 0 }, breaks: [] };
    } else {
      this.#conversations.delete(key);
    }
    this.#conversations.set(key, conversation);
    if (this.#conversations.size > this.#options.maxConversations) this.#conversations.delete(this.#conversations.keys().next().value!);
    return conversation;
  }

  /** One chat request answered (2xx, streamed whole). */
  answered(request: AnsweredRequest): void {
    const at = this.#now();
    const conversation = this.#conversation(request.tenant, request.model, printedId(request.print), at);
    this.totals.requests++;
    conversation.requests++;
    conversation.lastAt = at;
    conversation.slot = request.slot ?? null;
    conversation.messages = request.messages;
    conversation.turns = request.turns;
    for (const repair of request.repairs) conversation.repairs[repair.kind] = (conversation.repairs[repair.kind] ?? 0) + 1;
    if (request.cost !== undefined) this.#costed(conversation, request.cost, at);
    const { tokens } = request;
    if (tokens !== null) {
      conversation.points.push({ at, sent: tokens.sent, forwarded: tokens.forwarded });
      if (conversation.points.length > POINTS_PER_CONVERSATION) conversation.points.shift();
      // Forwarded as sent (observe mode, a history that fits), nothing was saved, whatever the estimate said.
      const saved = !request.changed ? 0 : Math.max(0, tokens.sent - tokens.forwarded);
      conversation.saved += saved;
      this.totals.tokensSaved += saved;
      conversation.cached += tokens.cached;
      conversation.prompt += tokens.forwarded;
    }
    const report = request.report;
    if (report === undefined) return;
    conversation.report = report;
    if (report.includes('epoch reused')) conversation.reused++;
  }

  #costed(conversation: Conversation, cost: AnswerCost, at: number): void {
    if (cost.seconds !== null) {
      conversation.server.prefill += cost.seconds.prefill;
      conversation.server.decode += cost.seconds.decode;
      this.totals.serverPrefill += cost.seconds.prefill;
      this.totals.serverDecode += cost.seconds.decode;
    }
    conversation.server.reprocess += cost.reprocessSeconds;
    this.totals.serverReprocess += cost.reprocessSeconds;
    for (const broken of cost.breaks) conversation.breaks.push({ at, ...broken });
    if (conversation.breaks.length > BREAKS_PER_CONVERSATION) conversation.breaks.splice(0, conversation.breaks.length - BREAKS_PER_CONVERSATION);
  }

  /** A chat request read and then refused (4xx) or failed (5xx): counted on its conversation, never dropped from the page. */
  ended(request: ReadRequest, status: number): void {
    const conversation = this.#conversation(request.tenant, request.model, printedId(request.print), this.#now());
    const kind = status < 500 ? 'refused' : 'failed';
    this.totals.requests++;
    this.totals[kind]++;
    conversation.requests++;
    conversation[kind]++;
    conversation.lastAt = this.#now();
  }

  compaction(event: CompactionEvent): void {
    if (event.outcome === 'failed') this.totals.failures++;
    if (event.outcome === 'truncated') this.totals.truncations++;
    if (event.outcome === 'observed') this.totals.observed++;
    if (event.written !== undefined && event.tier !== null) this.#written(event, event.tier, event.written);
  }

  /** An epoch, recorded where it was written (a request's own, or one prepared in the background after an answer). */
  #written(event: CompactionEvent, made: string, written: WrittenEpoch): void {
    const at = this.#now();
    // Each tier as it names itself on the page (a summary of old turns or of old steps is a summary); one the built-in list
    // does not hold (an engine given its own list) by its name.
    const tier = event.outcome === 'truncated' ? TRUNCATED : (tierNamed(BUILT_IN_TIERS, made)?.shownAs ?? made);
    const conversation = this.#conversation(written.tenant, event.model, conversationId(written.tenant, event.model, written.messages, written.hashes), at);
    conversation.epochs++;
    conversation.tiers[tier] = (conversation.tiers[tier] ?? 0) + 1;
    const notes = this.#options.showText && written.notes !== null ? written.notes.slice(0, MAX_NOTES_CHARS) : undefined;
    this.#events.push({
      at,
      tenant: written.tenant,
      conversation: conversation.id,
      model: event.model,
      tier,
      report: written.report,
      milliseconds: Math.round(written.milliseconds),
      background: event.pending,
      ...(notes === undefined ? {} : { notes }),
    });
    if (this.#events.length > this.#options.maxEvents) this.#events.shift();
  }

  summary(event: SummaryEvent): void {
    this.totals.summaryMs += event.milliseconds;
    this.totals.summaryCalls += event.calls;
  }

  epochLookup(): void {}

  summaryWait(): void {
    this.totals.waits++;
  }

  /**
   * What a viewer may see: every tenant's conversations (an admin, or no auth), else its own only;
   * notes (show_text) only of `notesOf`'s conversations (null: every tenant's, for an admin key).
   */
  snapshot(viewer: { readonly tenant: string | null; readonly notesOf?: string | null }) {
    const notesOf = viewer.notesOf === undefined ? viewer.tenant : viewer.notesOf;
    const shown = ({ tenant, notes, ...event }: CompactionItem & { readonly tenant: string }): CompactionItem =>
      notes === undefined || (notesOf !== null && tenant !== notesOf) ? event : { ...event, notes };
    const visible = [...this.#conversations.values()].filter((conversation) => viewer.tenant === null || conversation.tenant === viewer.tenant).reverse();
    // The viewer's own sum (a tenant's, or every tenant's for an admin): server seconds beside the tokens.
    const server = { prefill: 0, decode: 0, reprocess: 0 };
    for (const conversation of visible) {
      server.prefill += conversation.server.prefill;
      server.decode += conversation.server.decode;
      server.reprocess += conversation.server.reprocess;
    }
    return {
      conversations: visible.map(({ tenant: _tenant, cached, prompt, ...conversation }) => ({ ...conversation, kvReuse: prompt === 0 ? null : cached / prompt })),
      server,
      speeds: this.#server?.speeds() ?? [],
      compactions: this.#events.filter((event) => viewer.tenant === null || event.tenant === viewer.tenant).map(shown).reverse(),
      // Totals span every tenant: only an admin (or a proxy without keys) sees them.
      ...(viewer.tenant === null ? { totals: { ...this.totals, summarySeconds: this.#server?.summarySeconds() ?? { prefill: 0, decode: 0, calls: 0 } } } : {}),
      // A fleet's servers: where the upstreams are is the operator's to see, like the totals.
      ...(viewer.tenant === null && this.#server?.servers !== undefined ? { servers: this.#server.servers() } : {}),
    };
  }
}

/** Tells every observer in turn (the metrics and the dashboard). */
export function bothObservers(first: CompactionObserver, second: CompactionObserver): CompactionObserver {
  return {
    compaction: (event) => (first.compaction(event), second.compaction(event)),
    summary: (event) => (first.summary(event), second.summary(event)),
    epochLookup: (hit) => (first.epochLookup(hit), second.epochLookup(hit)),
    summaryWait: (milliseconds) => (first.summaryWait?.(milliseconds), second.summaryWait?.(milliseconds)),
  };
}

/** A chat answer as the dashboard takes it, with the prompt tokens the metrics already counted. */
export function answeredOf(observation: UsageObservation, tokens: PromptTokens | null, cost?: AnswerCost): AnsweredRequest {
  const { request } = observation;
  return { ...request, report: observation.report, tokens, ...(cost === undefined ? {} : { cost }) };
}

/** Each known model's window and the thresholds its budget gives, for the dashboard's table. */
export function dashboardModels(config: Config, windows: Record<string, number | null>): Array<{ model: string; window: number | null; threshold: number | null; softThreshold: number | null }> {
  const { threshold, soft_threshold: softThreshold, summary } = config.compaction;
  return Object.entries(windows).map(([model, window]) => {
    const settings = modelSettingsOf(config.models, model);
    const budget = budgetOf(window, undefined, settings.reserve_output_tokens, summary.max_tokens).tokens;
    return {
      model,
      window,
      threshold: budget === null ? null : Math.round(threshold * budget),
      softThreshold: budget === null ? null : Math.round(softThreshold * budget),
    };
  });
}
