import { DIGEST_BYTES, type PrefixPrint, WRITTEN } from './prefix-print.js';

/**
 * The prefix-break ledger: each forwarded request compared with the previous
 * forwarded request of its conversation, where its prompt first differs
 * (message index, tokens kept before it) and why. A break costs the server
 * everything after it again: that is where KV reuse goes, and the ledger
 * says whose doing it was.
 *
 * Causes: `client` (its own history changed: an edited message, another
 * system prompt), compactor's `compression`, `summary`, `truncation`,
 * `prune` or `repair` (what it wrote at the first changed index, or what it
 * had written there last time and took back), `slot` (the request ran in
 * another llama-server slot than last time: what the old slot held is not
 * in the new one), and `server` (the server reported reusing fewer tokens,
 * `cache_n`, than the unchanged prefix holds: a slot evicted, another
 * conversation in between, a server-side miss).
 *
 * Bounded: the last {@link MAX_LEDGER_CONVERSATIONS} conversations, each by
 * its last print (8 bytes and 5 more a message, never text).
 */

export const BREAK_CAUSES = ['client', 'compression', 'summary', 'truncation', 'prune', 'repair', 'slot', 'server'] as const;
export type BreakCause = (typeof BREAK_CAUSES)[number];

export interface PrefixBreak {
  readonly cause: BreakCause;
  /** The forwarded message index where the prompt first differs. */
  readonly index: number;
  /** Tokens before it (the part the server could keep). */
  readonly keptTokens: number;
  /** Tokens after it that the server had read last time and must read again (not the new messages). */
  readonly recomputedTokens: number;
}

/** Conversations remembered: a dashboard's worth and more; each costs ~21 bytes a message. */
export const MAX_LEDGER_CONVERSATIONS = 1024;

/**
 * How far the server's `cache_n` may fall short of the unchanged prefix
 * before it counts as the server's break: chat templates re-render the
 * last turn's ending (a generation prompt, a reasoning block dropped), some
 * tens of tokens; 5% for the estimate's error where no exact count scaled it.
 */
const SERVER_SLACK_TOKENS = 64;
const SERVER_SLACK_SHARE = 0.05;

/** What the answer said besides the print. */
export interface AnswerFacts {
  /** The slot the request ran in (upstream.slots), or null. */
  readonly slot: number | null;
  /** The prompt tokens the upstream counted, to scale the estimates by; undefined when it said none. */
  readonly promptTokens?: number | undefined;
  /** Tokens the server said it took from its cache (`cache_n`), or null. */
  readonly cachedTokens: number | null;
  /** Pair repairs in this request. */
  readonly repairs: number;
}

interface Last {
  readonly print: PrefixPrint;
  readonly slot: number | null;
}

const CAUSE_OF_WRITTEN: Readonly<Record<number, BreakCause>> = {
  [WRITTEN.summary]: 'summary',
  [WRITTEN.truncation]: 'truncation',
  [WRITTEN.compression]: 'compression',
  [WRITTEN.prune]: 'prune',
  [WRITTEN.repair]: 'repair',
};

function firstDifference(a: Buffer, b: Buffer): number {
  const count = Math.min(a.length, b.length) / DIGEST_BYTES;
  for (let index = 0; index < count; index++) {
    const at = index * DIGEST_BYTES;
    if (a.compare(b, at, at + DIGEST_BYTES, at, at + DIGEST_BYTES) !== 0) return index;
  }
  return count;
}

function tokensBefore(tokens: Uint32Array, end: number): number {
  let sum = 0;
  for (let index = 0; index < end && index < tokens.length; index++) sum += tokens[index]!;
  return sum;
}

/**
 * Conversations of one owner (tenant and model) looked through when a
 * request's own key is new: an edited system prompt or first message gives
 * another key, and the conversation it edited is one of the owner's last few.
 */
const RECENT_PER_OWNER = 4;

/** A history continues an earlier one when it holds at least this share of that one's messages (an edit changes one or two). */
const SAME_CONVERSATION_SHARE = 0.5;

function digestSet(digests: Buffer): Set<string> {
  const set = new Set<string>();
  for (let at = 0; at < digests.length; at += DIGEST_BYTES) set.add(digests.toString('latin1', at, at + DIGEST_BYTES));
  return set;
}

export class PrefixLedger {
  readonly #last = new Map<string, Last>();
  /** Per owner, its last conversations' keys, newest last. */
  readonly #recent = new Map<string, string[]>();
  readonly #max: number;

  constructor(options: { readonly maxConversations?: number } = {}) {
    this.#max = options.maxConversations ?? MAX_LEDGER_CONVERSATIONS;
  }

  get conversationCount(): number {
    return this.#last.size;
  }

  /**
   * Records a forwarded request and returns its breaks against the previous
   * one of its conversation (none for a first request, or one that only
   * added messages).
   */
  observe(print: PrefixPrint, facts: AnswerFacts): PrefixBreak[] {
    const [key, last] = this.#previous(print);
    if (key !== print.key) this.#last.delete(key);
    this.#last.delete(print.key);
    this.#last.set(print.key, { print, slot: facts.slot });
    this.#remember(print);
    if (this.#last.size > this.#max) this.#last.delete(this.#last.keys().next().value!);
    if (last === undefined) return [];

    const now = print.tokens.length;
    const before = last.print.tokens.length;
    const total = tokensBefore(print.tokens, now);
    const scale = facts.promptTokens !== undefined && total > 0 ? facts.promptTokens / total : 1;
    const scaled = (tokens: number): number => Math.round(tokens * scale);
    // What the client added since: read anew in any case, so never "recomputed".
    const added = Math.max(0, print.client.length - last.print.client.length) / DIGEST_BYTES;
    const addedTokens = total - tokensBefore(print.tokens, Math.max(0, now - added));

    const breaks: PrefixBreak[] = [];
    const differs = firstDifference(last.print.forwarded, print.forwarded);
    const broke = differs < Math.min(now, before);
    const moved = facts.slot !== null && last.slot !== null && facts.slot !== last.slot;
    const keptEnd = broke ? differs : Math.min(now, before);
    const kept = tokensBefore(print.tokens, keptEnd);
    if (moved) breaks.push({ cause: 'slot', index: 0, keptTokens: 0, recomputedTokens: scaled(kept) });
    if (broke) {
      const cause = this.#causeOf(last.print, print, differs, facts);
      breaks.push({ cause, index: differs, keptTokens: scaled(kept), recomputedTokens: scaled(Math.max(0, total - kept - addedTokens)) });
    }
    const expected = moved ? 0 : scaled(kept);
    const cached = facts.cachedTokens;
    if (cached !== null && cached < expected - Math.max(SERVER_SLACK_TOKENS, SERVER_SLACK_SHARE * expected)) {
      let index = 0;
      let sum = 0;
      while (index < now && scaled(sum + print.tokens[index]!) <= cached) sum += print.tokens[index++]!;
      breaks.push({ cause: 'server', index, keptTokens: cached, recomputedTokens: expected - cached });
    }
    return breaks;
  }

  /** The previous request of this print's conversation: by its key, else the owner's recent conversation it mostly repeats (an edited head). */
  #previous(print: PrefixPrint): [string, Last | undefined] {
    const own = this.#last.get(print.key);
    if (own !== undefined) return [print.key, own];
    const recent = this.#recent.get(print.owner);
    if (recent === undefined) return [print.key, undefined];
    const now = digestSet(print.client);
    for (let index = recent.length - 1; index >= 0; index--) {
      const candidate = this.#last.get(recent[index]!);
      if (candidate === undefined) continue;
      const messages = candidate.print.client.length / DIGEST_BYTES;
      let shared = 0;
      for (let at = 0; at < candidate.print.client.length; at += DIGEST_BYTES) if (now.has(candidate.print.client.toString('latin1', at, at + DIGEST_BYTES))) shared++;
      if (messages >= 2 && shared >= SAME_CONVERSATION_SHARE * messages) return [recent[index]!, candidate];
    }
    return [print.key, undefined];
  }

  #remember(print: PrefixPrint): void {
    const recent = (this.#recent.get(print.owner) ?? []).filter((key) => key !== print.key && this.#last.has(key));
    recent.push(print.key);
    if (recent.length > RECENT_PER_OWNER) recent.shift();
    this.#recent.delete(print.owner);
    this.#recent.set(print.owner, recent);
    if (this.#recent.size > this.#max) this.#recent.delete(this.#recent.keys().next().value!);
  }

  /** Why the prompt differs at `index`: what compactor wrote there now or last time, else the client's own change. */
  #causeOf(last: PrefixPrint, now: PrefixPrint, index: number, facts: AnswerFacts): BreakCause {
    const written = now.written[index] ?? WRITTEN.none;
    if (written !== WRITTEN.none) return CAUSE_OF_WRITTEN[written] ?? 'client';
    const clientChanged = firstDifference(last.client, now.client) < Math.min(last.client.length, now.client.length) / DIGEST_BYTES;
    if (clientChanged) return 'client';
    const before = last.written[index] ?? WRITTEN.none;
    if (before !== WRITTEN.none) return CAUSE_OF_WRITTEN[before] ?? 'client';
    // The client's history only grew, so compactor moved this message: it dropped the ones before it for what it
    // wrote after it (the steps tier keeps the task anchor and puts its notes in the next assistant message).
    const firstWritten = now.written.findIndex((kind, at) => at > index && kind !== WRITTEN.none);
    if (firstWritten !== -1) return CAUSE_OF_WRITTEN[now.written[firstWritten]!] ?? 'client';
    return facts.repairs > 0 ? 'repair' : 'client';
  }
}
