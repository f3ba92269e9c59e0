import type { AnswerEdits } from '../../transcript/context-edits.js';
import type { ModeChoice } from './request-mode.js';
import { setImmediate as nextTurnOfTheEventLoop } from 'node:timers/promises';
import { type ChatRequestBody, PARSE_AHEAD_BYTES } from '../../formats/registry.js';
import type { ChatContext, ChatHooks, ChatPlan, ReadFigures, RequestFigures, UsageHook } from './planner.js';
import { joinedInSlices, runInSlices, runNow } from '../../transcript/slices.js';
import { requestFiguresSteps } from './request-figures.js';
import type { ExchangeRead } from './read-request.js';

/**
 * The second step of a chat exchange: the planner asked (the compaction
 * engine, through engine-planner.ts), and the bytes to forward made: the
 * client's own when nothing changed, else its bytes with only the
 * conversation spliced in by the wire format.
 */

export interface Planned {
  readonly context: ChatContext;
  /** The body forwarded: the planner's, or the pairs' (the client's when nothing changed). */
  readonly body: Readonly<Record<string, unknown>>;
  /** Whether `body` differs from what the client sent. */
  readonly changed: boolean;
  readonly bytes: Buffer;
  /** The pairs' report and the planner's, for `x-compactor`. */
  readonly report: string | undefined;
  readonly plan: ChatPlan | undefined;
}

/**
 * What the answer's end reads of a request once it was forwarded: figures,
 * never the parsed body, the forwarded one or their messages (see
 * RequestFigures), so an answer in flight or an idle stream holds none.
 */
export interface Forwarded {
  readonly figures: RequestFigures;
  readonly report: string | undefined;
  readonly forwardedBytes: number;
  readonly clientTokens: number | undefined;
  /** The planner's hook for this request's answer. */
  readonly onUsage: UsageHook | undefined;
  /** What the request's context edits add to its answer. */
  readonly answerEdits: AnswerEdits | undefined;
}

/**
 * The figures kept of a forwarded request; `large`: the client's body was (PARSE_AHEAD_BYTES or more), and its
 * history's figures (its prefix print hashes every message) are taken a slice per turn of the loop. An ordinary
 * body's are returned as they are, not as a promise: nothing waits there (issue 40).
 */
export function forwardedOf(planned: Planned, read: ReadFigures, large: boolean, upstream: string | null = null): Forwarded | Promise<Forwarded> {
  const clientTokens = planned.plan?.clientTokens;
  const steps = requestFiguresSteps(read, planned.context, planned.body, clientTokens, upstream);
  if (!large) return forwardedWith(planned, runNow(steps));
  return runInSlices(steps, nextTurnOfTheEventLoop).then((figures) => forwardedWith(planned, figures));
}

function forwardedWith(planned: Planned, figures: RequestFigures): Forwarded {
  return { figures, report: planned.report, forwardedBytes: planned.bytes.length, clientTokens: planned.plan?.clientTokens, onUsage: planned.plan?.onUsage, answerEdits: planned.plan?.answerEdits };
}

/**
 * For a large body (the size read.ts parses ahead and reads in slices), each
 * phase (read and pairs, plan, splice) holds the event loop for tens of
 * milliseconds or more (a 32 MiB body: hundreds): the loop runs between
 * phases, so other clients' requests and /healthz are served between them
 * rather than after all of them. An ordinary body waits for no turn, and
 * for no promise either.
 */
function isLarge(raw: Buffer): boolean {
  return raw.length >= PARSE_AHEAD_BYTES;
}

async function joinedBody(parts: readonly Buffer[], large: boolean): Promise<Buffer> {
  if (parts.length === 1) return parts[0]!;
  return large ? runInSlices(joinedInSlices(parts), nextTurnOfTheEventLoop) : Buffer.concat(parts);
}

function joinReports(first: string | undefined, second: string | undefined): string | undefined {
  const hasFirst = first !== undefined && first !== '';
  const hasSecond = second !== undefined && second !== '';
  if (hasFirst && hasSecond) return `${first}; ${second}`;
  return hasFirst ? first : hasSecond ? second : undefined;
}

export async function planExchange(hooks: ChatHooks, read: ExchangeRead, context: ChatContext, choice?: ModeChoice): Promise<Planned> {
  const { request, raw, observing } = read;
  const pairs = request.pairs;
  let plan: ChatPlan | undefined;
  if (isLarge(raw)) await nextTurnOfTheEventLoop();
  // Mode off (x-compactor-mode): forwarded as sent, nothing planned.
  if (hooks.planner !== undefined && request.untouched === undefined && choice?.mode !== 'off') plan = await hooks.planner(context);
  const changedBody: Readonly<Record<string, unknown>> | undefined = plan?.body ?? (pairs.changed ? pairs.body : undefined);
  if (changedBody !== undefined && isLarge(raw)) await nextTurnOfTheEventLoop();
  // Only the conversation is rewritten: the rest of the client's bytes go as they came (see src/formats/splice.ts).
  // A large body's parts (mostly the client's own bytes of what it kept) are joined a MiB per turn of the loop.
  const rewritten = changedBody === undefined ? raw : await joinedBody(request.partsFor(raw, (changedBody as ChatRequestBody).messages), raw.length >= PARSE_AHEAD_BYTES);
  // A field only compactor reads (Anthropic's context_management) never reaches the upstream.
  const bytes = request.forwardable === undefined ? rewritten : request.forwardable(rewritten);
  const joined = joinReports(joinReports(request.untouched, pairs.report), plan?.report);
  const said = observing && joined !== undefined ? `observe: ${joined}` : joined;
  const note = choice?.note;
  const report = choice?.mode === 'off' && note !== undefined ? `${note}: forwarded as sent` : joinReports(note, said);
  return { context, body: changedBody ?? pairs.body, changed: changedBody !== undefined || bytes !== raw, bytes, report, plan };
}
