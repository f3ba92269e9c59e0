import { type KnownPrefixes, conversationPrintSteps } from '../../compaction/epochs/known-prefixes.js';
import { isRealUserMessage } from '../../transcript/groups.js';
import type { ChatMessage } from '../../transcript/message.js';
import { type Slices, runNow } from '../../transcript/slices.js';
import { estimateRequestTokens } from '../../transcript/tokens.js';
import { prefixPrintSteps } from '../ledger/prefix-print.js';
import { tenantOfRequest } from '../edge/tenant.js';
import type { ChatContext, ReadFigures, RequestFigures } from './planner.js';

/**
 * What the answer's end reads of a request, taken when it is read and forwarded
 * (RequestFigures in planner.ts says why: no parsed body is kept past the forward).
 */

/**
 * Taken once the request was read: a refused or failed one is counted on its conversation from these.
 * `prefixes`: the engine's known conversations, so only what an earlier request did not hold is digested.
 */
export function readFiguresOf(context: Pick<ChatContext, 'keyTenant' | 'headers' | 'body' | 'sourceBytes'>, prefixes?: KnownPrefixes): ReadFigures {
  return runNow(readFiguresSteps(context, prefixes));
}

/** The same figures as steps: what a large first-seen history needs digested is taken a slice at a time (issue 34). */
export function* readFiguresSteps(context: Pick<ChatContext, 'keyTenant' | 'headers' | 'body' | 'sourceBytes'>, prefixes?: KnownPrefixes): Slices<ReadFigures> {
  const { messages, model } = context.body;
  let turns = 0;
  for (const message of messages) if (isRealUserMessage(message)) turns++;
  const tenant = tenantOfRequest(context);
  const print = prefixes === undefined ? yield* conversationPrintSteps({ tenant, model }, messages) : yield* prefixes.printSteps({ tenant, model }, messages, context.sourceBytes);
  return { tenant, model, print, messages: messages.length, turns };
}

/** Taken when the request is forwarded: from here on only these figures are kept. */
export function requestFiguresOf(read: ReadFigures, context: ChatContext, forwarded: Readonly<Record<string, unknown>>, clientTokens: number | undefined, upstream: string | null = null): RequestFigures {
  return runNow(requestFiguresSteps(read, context, forwarded, clientTokens, upstream));
}

/** The same figures as steps: what a large history's print still needs is taken a slice at a time (issue 34). */
export function* requestFiguresSteps(
  read: ReadFigures,
  context: ChatContext,
  forwarded: Readonly<Record<string, unknown>>,
  clientTokens: number | undefined,
  upstream: string | null = null,
): Slices<RequestFigures> {
  const changed = forwarded !== context.body;
  // With the planner's own count of the client's history, no estimate is needed (promptTokensOf).
  const estimated = changed && clientTokens === undefined;
  const forwardedMessages = forwarded['messages'];
  const prefix = yield* prefixPrintSteps(read.tenant, read.model, context.body.messages, Array.isArray(forwardedMessages) ? (forwardedMessages as ChatMessage[]) : context.body.messages, read.print);
  return { ...read, changed, estimates: estimated ? estimatesOf(context, forwarded) : undefined, repairs: context.pairRepairs, slot: context.slot ?? null, prefix, ...(upstream === null ? {} : { upstream }) };
}

function estimatesOf(context: ChatContext, forwarded: Readonly<Record<string, unknown>>): RequestFigures['estimates'] {
  const forwardedMessages = forwarded['messages'];
  return {
    client: estimateRequestTokens({ messages: context.body.messages, tools: context.body['tools'] }),
    forwarded: estimateRequestTokens({ messages: Array.isArray(forwardedMessages) ? (forwardedMessages as ChatMessage[]) : [], tools: forwarded['tools'] }),
  };
}
