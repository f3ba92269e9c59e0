import { randomUUID } from 'node:crypto';
import { setImmediate as nextTurnOfTheEventLoop } from 'node:timers/promises';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { PARSE_AHEAD_BYTES } from '../../formats/registry.js';
import type { HeaderRecord, UpstreamClient, UpstreamResponse } from '../../upstream/client.js';
import type { SlotRouter } from '../../slots/slot-router.js';
import { forwardOnFleet } from './fleet-forward.js';
import { forwardRequestHeaders } from '../edge/headers.js';
import { targetPath } from '../edge/request-record.js';
import { AnswerWriter } from './answer.js';
import { ExchangeContext } from './exchange-context.js';
import { type Forwarded, type Planned, forwardedOf, planExchange } from './ask-planner.js';
import { readSettingsFor, readExchange } from './read-request.js';
import { readFiguresOf, readFiguresSteps } from './request-figures.js';
import { requestModeOf } from './request-mode.js';
import { respond } from './respond.js';
import type { ChatRoute } from './route.js';
import { mayBeRefusal, readRefusal } from './window-refusal.js';
import { SLOT_READ_AHEAD, SlotHold, pinToSlot } from './slot-pin.js';
import { openCarriedItems, openedLine } from './carried-items.js';
import { editedAnswer, localAnswer } from './edited-answer.js';
import { runInSlices, runNow } from '../../transcript/slices.js';

/**
 * One chat request, from the client's bytes to the end of the answer, as a
 * pipeline of values: read (read.ts, pure) → plan (plan.ts) → forward (here)
 * → respond (respond.ts, relaying through relay-stream.ts or relay-json.ts).
 * Only the answer writer (answer.ts) writes to the client: a failure before
 * the answer began gets the format's JSON error, after it began (progress
 * comments went out) the format's error event.
 */

export async function runChatExchange(request: FastifyRequest, reply: FastifyReply, route: ChatRoute): Promise<void> {
  const answer = new AnswerWriter(request, reply, route);
  const slot = new SlotHold();
  try {
    await exchange(answer, slot);
  } catch (error) {
    answer.fail(error);
  } finally {
    // The answer ended (relayed, failed or abandoned): the next request of the slot queue may go.
    slot.release();
  }
}

async function exchange(answer: AnswerWriter, slot: SlotHold): Promise<void> {
  // Planned and forwarded in a function of its own: its frame, which holds the parsed body, is gone while the answer streams.
  const sent = await planAndForward(answer, slot);
  // An exchange on a llama-server slot takes the answer in ahead of its client: the slot goes to the next when the upstream is done.
  if (sent !== undefined) await respond(answer, sent.upstreamAnswer, sent.forwarded, slot.held ? SLOT_READ_AHEAD : undefined);
}

function planAndForward(answer: AnswerWriter, slot: SlotHold): Promise<{ upstreamAnswer: UpstreamResponse; forwarded: Forwarded } | undefined> {
  // Items the client carries for the server (a Responses `compaction` item) opened first: every step after reads the opened body.
  const opened = openedLine(openCarriedItems(answer.request, answer.route.format, answer.route.options));
  // A large body takes its place in limits.in_flight_bytes for its read, plan and forward (body-budget.ts); it may wait, or get a 503.
  // An ordinary one goes straight on: no async frame of its own here, no turn of the microtask queue (issue 40).
  const body: unknown = answer.request.body;
  const { bodies } = answer.route.options;
  if (bodies === undefined || !Buffer.isBuffer(body) || body.length < PARSE_AHEAD_BYTES) return readPlanAndForward(answer, slot, opened);
  return withinBudget(bodies, body.length, () => readPlanAndForward(answer, slot, opened));
}

async function withinBudget<T>(bodies: NonNullable<ChatRoute['options']['bodies']>, bytes: number, work: () => Promise<T>): Promise<T> {
  const release = await bodies.take(bytes);
  try {
    return await work();
  } finally {
    release();
  }
}

async function readPlanAndForward(answer: AnswerWriter, slot: SlotHold, opened: string | undefined): Promise<{ upstreamAnswer: UpstreamResponse; forwarded: Forwarded } | undefined> {
  const { hooks } = answer.route.options;
  let planned = await readAndPlan(answer, opened);
  if (planned === undefined) return undefined;
  // A compaction the client asked to pause after (Anthropic's pause_after_compaction) is the answer: the model is not asked.
  const paused = pausedAnswer(answer, planned);
  if (paused !== undefined) return { upstreamAnswer: paused, forwarded: await figuresTaken(answer, planned, null) };
  let upstreamAnswer = await forward(answer, planned, slot);
  // The upstream refused the prompt at a window smaller than the one planned with: learned, planned again, sent once more.
  const refused = hooks.onRefusal === undefined || !mayBeRefusal(upstreamAnswer) ? null : await readRefusal(upstreamAnswer);
  if (refused !== null) {
    // Planning again may summarize on this conversation's slot: the slot is not held meanwhile.
    slot.set(null);
    upstreamAnswer = refused.answer;
    const again = refused.window === null ? undefined : await afterRefusal(answer, planned, refused.window, opened);
    if (again === null) return undefined;
    if (again !== undefined) [planned, upstreamAnswer] = [again, await forward(answer, again, slot)];
  }
  const taking = figuresTaken(answer, planned, answer.record.upstreamServer);
  const forwarded = taking instanceof Promise ? await taking : taking;
  // The request's context edits reach its answer (applied_edits, a compaction block) as its format words them.
  const { format } = answer.route;
  const edits = forwarded.answerEdits;
  if (edits !== undefined && format.answerEditor !== undefined) upstreamAnswer = editedAnswer(upstreamAnswer, format.answerEditor(edits));
  return { upstreamAnswer, forwarded };
}

/**
 * The figures kept of a request once it is answered (by the upstream on `upstream`, or by compactor itself: null).
 * The client's bytes and the parsed body are not read again from here on (only planning again after a refusal reads
 * them): a long stream does not hold them; the answer's end reads only these figures. An ordinary body's are taken at
 * once, not as a promise (forwardedOf).
 */
function figuresTaken(answer: AnswerWriter, planned: Planned, upstream: string | null): Forwarded | Promise<Forwarded> {
  const large = answer.clientBytes.length >= PARSE_AHEAD_BYTES;
  answer.forgetClientBytes();
  const taking = forwardedOf(planned, answer.record.chat ?? readFiguresOf(planned.context, answer.route.options.prefixes), large, upstream);
  if (!(taking instanceof Promise)) return kept(answer, taking);
  return taking.then((forwarded) => kept(answer, forwarded));
}

function kept(answer: AnswerWriter, forwarded: Forwarded): Forwarded {
  answer.record.chat = forwarded.figures;
  return forwarded;
}

/** The answer compactor gives itself for a paused compaction, or undefined when the request goes upstream. */
function pausedAnswer(answer: AnswerWriter, planned: Planned): UpstreamResponse | undefined {
  const edits = planned.plan?.answerEdits;
  const { format } = answer.route;
  if (edits?.pause !== true || edits.compaction === undefined || format.pausedAnswer === undefined) return undefined;
  const streamed = planned.context.streamed === true;
  const id = `msg_compactor_${randomUUID().replaceAll('-', '')}`;
  return localAnswer(format.pausedAnswer({ ...edits, compaction: edits.compaction }, planned.context.body.model, id, streamed), streamed);
}

/** Read, then plan; undefined when the exchange already ended (the client left during planning). `opened`: the report's words for the carried items opened. */
async function readAndPlan(answer: AnswerWriter, opened: string | undefined): Promise<Planned | undefined> {
  const { request, record, route } = answer;
  const choice = requestModeOf(request.headers, route.options.config);
  const settings = readSettingsFor(route.read, choice.mode, route.options.config.pairs);
  // An ordinary body is read at once (not a promise): awaited only when it is not.
  const reading = readExchange(settings, request.body, request.headers['content-type'], request.arrival);
  const read = reading instanceof Promise ? await reading : reading;
  const pairs = read.request.pairs;
  record.repairs = pairs.repairs.length;
  record.pairRepairs = pairs.repairs;
  const context = new ExchangeContext(answer, read.request);
  context.mode = choice.mode;
  // A refused or failed request is counted on its conversation (the dashboard), once it was read; a large first-seen
  // history's digests are taken a slice per turn of the loop (issue 34).
  const figures = readFiguresSteps(context, route.options.prefixes);
  record.chat = answer.clientBytes.length >= PARSE_AHEAD_BYTES ? await runInSlices(figures, nextTurnOfTheEventLoop) : runNow(figures);
  const planned = await planExchange(route.options.hooks, read, context, choice);
  if (answer.abort.aborted) {
    if (answer.endedBy !== null) throw answer.endedBy;
    answer.clientGone();
    return undefined;
  }
  if (opened === undefined) {
    record.report = planned.report ?? null;
    return planned;
  }
  const report = planned.report === undefined ? opened : `${opened}; ${planned.report}`;
  record.report = report;
  return { ...planned, report };
}

async function forward(answer: AnswerWriter, planned: Planned, slot: SlotHold): Promise<UpstreamResponse> {
  const { route } = answer;
  const { fleet } = route.options;
  if (fleet === undefined) return forwardTo(answer, planned, slot, route.options.upstream, route.options.slots, route.forwardHeaders);
  // Each server of a fleet has its own slots and key (fleet-forward.ts sends to the next when one does not answer).
  return forwardOnFleet(answer, planned, fleet, (server) =>
    forwardTo(answer, planned, slot, server.client, server.slots, { ...route.forwardHeaders, apiKey: server.client.apiKey }),
  );
}

async function forwardTo(
  answer: AnswerWriter,
  planned: Planned,
  slot: SlotHold,
  upstream: Pick<UpstreamClient, 'forward'>,
  slots: SlotRouter | undefined,
  forwardHeaders: ChatRoute['forwardHeaders'],
): Promise<UpstreamResponse> {
  const { request, record } = answer;
  // A request sent again gives up the slot of its first send before it joins the slot queue again.
  slot.set(null);
  const pinning = pinToSlot(answer, planned, slots);
  const pinned = pinning === null ? null : await pinning;
  slot.set(pinned?.lease ?? null);
  const bytes = pinned?.bytes ?? planned.bytes;
  const headers: HeaderRecord = forwardRequestHeaders(request.headers, forwardHeaders);
  headers['content-length'] = String(bytes.length);
  if (planned.changed || pinned !== null || headers['content-type'] === undefined) headers['content-type'] = 'application/json';
  const started = performance.now();
  try {
    return await upstream.forward({ method: 'POST', path: targetPath(request.url), headers, body: bytes, signal: answer.abort.emitter });
  } catch (error) {
    // A send that failed holds no slot: the next server's send, or the next request of this slot's queue, may go.
    slot.set(null);
    throw error;
  } finally {
    record.upstreamMs = performance.now() - started;
  }
}

/**
 * After a refusal naming a window: the request planned again when the
 * planner learned a smaller window (undefined: relay the refusal as it came;
 * null: the exchange already ended).
 */
async function afterRefusal(answer: AnswerWriter, planned: Planned, window: number, opened: string | undefined): Promise<Planned | null | undefined> {
  const { options } = answer.route;
  if (!(await options.hooks.onRefusal!(planned.context, window))) return undefined;
  // Counted here: the refusal sent again is not relayed, where respond() would count it.
  options.onContextExceeded?.(planned.context.body.model);
  answer.request.log.warn(
    { model: planned.context.body.model, window },
    'the upstream refused the prompt: its window is smaller than the one planned with (a context_window set too large, or a server restarted with a smaller -c); learned it, compacting and sending once more',
  );
  const again = await readAndPlan(answer, opened);
  if (again === undefined) return null;
  const learned = `upstream window ${window} learned from its refusal, sent again`;
  const report = again.report === undefined ? learned : `${learned}; ${again.report}`;
  answer.record.report = report;
  return { ...again, report };
}
