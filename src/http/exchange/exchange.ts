import type { FastifyReply, FastifyRequest } from 'fastify';
import { PARSE_AHEAD_BYTES } from '../../formats/registry.js';
import type { HeaderRecord, UpstreamResponse } from '../../upstream/client.js';
import { forwardRequestHeaders } from '../edge/headers.js';
import { targetPath } from '../edge/request-record.js';
import { AnswerWriter } from './answer.js';
import { ExchangeContext } from './exchange-context.js';
import { type Forwarded, type Planned, forwardedOf, planExchange } from './ask-planner.js';
import { readSettingsFor, readExchange } from './read-request.js';
import { readFiguresOf } from './request-figures.js';
import { requestModeOf } from './request-mode.js';
import { respond } from './respond.js';
import type { ChatRoute } from './route.js';
import { readRefusal } from './window-refusal.js';
import { SLOT_READ_AHEAD, SlotHold, pinToSlot } from './slot-pin.js';

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

async function planAndForward(answer: AnswerWriter, slot: SlotHold): Promise<{ upstreamAnswer: UpstreamResponse; forwarded: Forwarded } | undefined> {
  // A large body takes its place in limits.in_flight_bytes for its read, plan and forward (body-budget.ts); it may wait, or get a 503.
  const body: unknown = answer.request.body;
  const { bodies } = answer.route.options;
  const release = bodies !== undefined && Buffer.isBuffer(body) && body.length >= PARSE_AHEAD_BYTES ? await bodies.take(body.length) : undefined;
  try {
    return await readPlanAndForward(answer, slot);
  } finally {
    release?.();
  }
}

async function readPlanAndForward(answer: AnswerWriter, slot: SlotHold): Promise<{ upstreamAnswer: UpstreamResponse; forwarded: Forwarded } | undefined> {
  const { hooks } = answer.route.options;
  let planned = await readAndPlan(answer);
  if (planned === undefined) return undefined;
  let upstreamAnswer = await forward(answer, planned, slot);
  // The upstream refused the prompt at a window smaller than the one planned with: learned, planned again, sent once more.
  const refused = hooks.onRefusal === undefined ? null : await readRefusal(upstreamAnswer);
  if (refused !== null) {
    // Planning again may summarize on this conversation's slot: the slot is not held meanwhile.
    slot.set(null);
    upstreamAnswer = refused.answer;
    const again = refused.window === null ? undefined : await afterRefusal(answer, planned, refused.window);
    if (again === null) return undefined;
    if (again !== undefined) [planned, upstreamAnswer] = [again, await forward(answer, again, slot)];
  }
  // Not read again from here on (only planning again after a refusal reads them): a long stream does not hold them,
  // nor the parsed body: the answer's end reads only the figures taken here.
  answer.forgetClientBytes();
  const forwarded = forwardedOf(planned, answer.record.chat ?? readFiguresOf(planned.context, answer.route.options.prefixes));
  answer.record.chat = forwarded.figures;
  return { upstreamAnswer, forwarded };
}

/** Read, then plan; undefined when the exchange already ended (the client left during planning). */
async function readAndPlan(answer: AnswerWriter): Promise<Planned | undefined> {
  const { request, record, route } = answer;
  const choice = requestModeOf(request.headers, route.options.config);
  const settings = readSettingsFor(route.read, choice.mode, route.options.config.pairs);
  const read = await readExchange(settings, request.body, request.headers['content-type']);
  const pairs = read.request.pairs;
  record.repairs = pairs.repairs.length;
  record.pairRepairs = pairs.repairs;
  const context = new ExchangeContext(answer, read.request);
  context.mode = choice.mode;
  // A refused or failed request is counted on its conversation (the dashboard), once it was read.
  record.chat = readFiguresOf(context, route.options.prefixes);
  const planned = await planExchange(route.options.hooks, read, context, choice);
  if (answer.abort.aborted) {
    if (answer.endedBy !== null) throw answer.endedBy;
    answer.clientGone();
    return undefined;
  }
  record.report = planned.report ?? null;
  return planned;
}

async function forward(answer: AnswerWriter, planned: Planned, slot: SlotHold): Promise<UpstreamResponse> {
  const { request, route, record } = answer;
  // A request sent again gives up the slot of its first send before it joins the slot queue again.
  slot.set(null);
  const pinned = await pinToSlot(answer, planned);
  slot.set(pinned?.lease ?? null);
  const bytes = pinned?.bytes ?? planned.bytes;
  const headers: HeaderRecord = forwardRequestHeaders(request.headers, route.forwardHeaders);
  headers['content-length'] = String(bytes.length);
  if (planned.changed || pinned !== null || headers['content-type'] === undefined) headers['content-type'] = 'application/json';
  const started = performance.now();
  try {
    return await route.options.upstream.forward({ method: 'POST', path: targetPath(request.url), headers, body: bytes, signal: answer.abort.emitter });
  } finally {
    record.upstreamMs = performance.now() - started;
  }
}

/**
 * After a refusal naming a window: the request planned again when the
 * planner learned a smaller window (undefined: relay the refusal as it came;
 * null: the exchange already ended).
 */
async function afterRefusal(answer: AnswerWriter, planned: Planned, window: number): Promise<Planned | null | undefined> {
  const { options } = answer.route;
  if (!(await options.hooks.onRefusal!(planned.context, window))) return undefined;
  // Counted here: the refusal sent again is not relayed, where respond() would count it.
  options.onContextExceeded?.(planned.context.body.model);
  answer.request.log.warn(
    { model: planned.context.body.model, window },
    'the upstream refused the prompt: its window is smaller than the one planned with (a context_window set too large, or a server restarted with a smaller -c); learned it, compacting and sending once more',
  );
  const again = await readAndPlan(answer);
  if (again === undefined) return null;
  const learned = `upstream window ${window} learned from its refusal, sent again`;
  const report = again.report === undefined ? learned : `${learned}; ${again.report}`;
  answer.record.report = report;
  return { ...again, report };
}
