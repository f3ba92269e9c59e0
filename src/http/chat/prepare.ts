import { ExchangeContext } from './context.js';
import { requestModeOf } from './request-mode.js';
import type { ChatExchange } from './exchange.js';
import type { ChatPlan, ChatRequestBody } from './planner.js';

/**
 * The first half of a chat exchange: the client's bytes read once (parse,
 * validate), tool-call pairs handled, the planner asked, and the bytes to
 * forward made: the client's own when nothing changed, else its bytes with
 * only `messages` spliced in (splice-messages.ts).
 */

export interface Prepared {
  readonly context: ExchangeContext;
  /** The body forwarded: the planner's, or the pairs' (the client's when nothing changed). */
  readonly body: Readonly<Record<string, unknown>>;
  /** Whether `body` differs from what the client sent. */
  readonly changed: boolean;
  readonly bytes: Buffer;
  /** The pairs' report and the planner's, for `x-compactor`. */
  readonly report: string | undefined;
  readonly plan: ChatPlan | undefined;
}

function joinReports(first: string | undefined, second: string | undefined): string | undefined {
  const hasFirst = first !== undefined && first !== '';
  const hasSecond = second !== undefined && second !== '';
  if (hasFirst && hasSecond) return `${first}; ${second}`;
  return hasFirst ? first : hasSecond ? second : undefined;
}

/** Resolves with what to forward, or undefined when the exchange already ended (the client left during planning). */
export async function prepare(exchange: ChatExchange): Promise<Prepared | undefined> {
  const { config, hooks } = exchange.route.options;
  const request = exchange.request;
  const record = exchange.record;

  const format = exchange.route.format;
  const choice = requestModeOf(request.headers, config);
  // Observe mode forwards exactly what the client sent: pairs are checked and reported, never repaired or refused.
  const observing = choice.mode === 'observe';
  const read = format.read(request.body, request.headers['content-type'], choice.mode === 'off' ? 'off' : config.pairs, observing);
  const pairs = read.pairs;
  record.repairs = pairs.repairs.length;
  record.pairRepairs = pairs.repairs;
  const raw = request.body as Buffer;
  const context = new ExchangeContext(exchange, pairs.body, raw, pairs.changed, pairs.repairs, read.stream);
  record.chat = context;
  context.mode = choice.mode;

  let plan: ChatPlan | undefined;
  if (hooks.planner !== undefined && read.untouched === undefined && choice.mode !== 'off') plan = await hooks.planner(context);
  if (exchange.abort.aborted) {
    if (exchange.endedBy !== null) throw exchange.endedBy;
    exchange.clientGone();
    return undefined;
  }

  const changedBody: Readonly<Record<string, unknown>> | undefined = plan?.body ?? (pairs.changed ? pairs.body : undefined);
  // Only `messages` is rewritten: the rest of the client's bytes go as they came (see splice-messages.ts).
  const bytes = changedBody === undefined ? raw : read.bytesFor(raw, (changedBody as ChatRequestBody).messages);
  const joined = joinReports(joinReports(read.untouched, pairs.report), plan?.report);
  const said = observing && joined !== undefined ? `observe: ${joined}` : joined;
  const report = choice.mode === 'off' && choice.note !== undefined ? `${choice.note}: forwarded as sent` : joinReports(choice.note, said);
  record.report = report ?? null;
  return { context, body: changedBody ?? (pairs.body as ChatRequestBody), changed: changedBody !== undefined, bytes, report, plan };
}
