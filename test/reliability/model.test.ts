import { type ClientRequest, request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeUpstream, type FakeExchange } from '../support/fake-upstream.js';
import { type Proxy, startProxy } from '../support/proxy.js';
import { sseData } from '../support/sse.js';
import { propertyParameters } from '../transcript/arbitraries.js';

/**
 * Issue 7, the model-based test: random sequences of client sends and aborts,
 * upstream chunks, ends, resets, error statuses and stalls, and a shutdown,
 * against the real proxy and a loopback upstream. After each sequence:
 * every request ended in exactly one terminal state, the one its first cause
 * calls for; the upstream request was aborted if and only if the client left
 * first (or compactor ended it: a timeout, a reset, the shutdown); the pool
 * is back to zero requests in flight; one log line per request; no unhandled
 * rejection.
 *
 * Timeouts are real (250 ms, which undici's coarse timers turn into 0.5 to
 * 1 s of idleness): a `stall` waits them out. When commands are slow (a
 * loaded CI machine), a timeout may also fire on its own; the oracle reads the
 * times things happened and accepts a timeout exactly when one was due.
 */

const CHAT = '/v1/chat/completions';
const TIMEOUT_MS = 250;
/** Fast timers tick every 499 ms: the least and the most idle time after which a timeout of TIMEOUT_MS fires (with a margin). */
const MIN_IDLE_MS = 450;
const MAX_IDLE_MS = 1_100;
/** How far apart two causes may be and still race (timers, loopback, the event loop). */
const RACE_MS = 60;
const MAX_REQUESTS = 5;

type Cause = 'finish' | 'status' | 'reset' | 'timeout' | 'shutdown' | 'client';

interface ClientSide {
  status: number | null;
  body: Buffer[];
  ending: 'ended' | 'broken' | 'aborted' | 'error' | null;
  /** When the test closed the client's connection. */
  leftAt: number | null;
  readonly settled: Promise<void>;
}

interface UpstreamSide {
  exchange: FakeExchange | null;
  headersAt: number | null;
  /** Times the upstream did something the proxy waits for: the request's arrival, the headers, each write. */
  readonly activity: number[];
  readonly written: Buffer[];
  /** What ended the upstream's answer, and when (null while it is open). */
  ended: { readonly how: 'finish' | 'status' | 'reset'; readonly at: number; readonly status?: number } | null;
}

interface Tracked {
  readonly id: number;
  readonly stream: boolean;
  readonly sentAt: number;
  readonly afterShutdown: boolean;
  readonly outgoing: ClientRequest;
  readonly client: ClientSide;
  readonly upstream: UpstreamSide;
}

interface Real {
  readonly proxy: Proxy;
  readonly requests: Tracked[];
  shutdownAt: number | null;
  readonly stallsAt: number[];
}

interface Model {
  /** Per request: whether the upstream may still act on it, and whether its headers went out. */
  readonly requests: Array<{ open: boolean; headers: boolean; stream: boolean }>;
  shutdown: boolean;
}

let upstream: FakeUpstream;
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown): void => {
  unhandled.push(reason);
};
let current: Real | undefined;
/** How often each first cause came up, to show what the runs covered. */
const seen = new Map<Cause | 'after shutdown', number>();

beforeAll(async () => {
  upstream = await FakeUpstream.start();
  process.on('unhandledRejection', onUnhandled);
});
afterAll(async () => {
  process.off('unhandledRejection', onUnhandled);
  await upstream.close();
});

function track(real: Real, index: number): Tracked | undefined {
  return real.requests[index];
}

function sendRequest(real: Real, stream: boolean): Tracked {
  const id = real.requests.length;
  const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: `request ${id}` }], stream });
  const outgoing = request(real.proxy.url + CHAT, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
    agent: false,
  });
  let settle: () => void = () => undefined;
  const client: ClientSide = { status: null, body: [], ending: null, leftAt: null, settled: new Promise<void>((resolve) => (settle = resolve)) };
  const finish = (ending: NonNullable<ClientSide['ending']>): void => {
    if (client.ending !== null) return;
    client.ending = client.leftAt !== null ? 'aborted' : ending;
    settle();
  };
  // Before a response, a closed connection is an error; after one, the response says how its body ended.
  outgoing.on('error', () => {
    if (client.status === null) finish('error');
  });
  outgoing.on('close', () => {
    if (client.status === null) finish('error');
    else setImmediate(() => finish('broken'));
  });
  outgoing.on('response', (response) => {
    client.status = response.statusCode ?? 0;
    response.on('data', (chunk: Buffer) => client.body.push(chunk));
    response.on('error', () => undefined);
    response.once('end', () => finish(response.complete ? 'ended' : 'broken'));
    response.once('close', () => finish(response.complete ? 'ended' : 'broken'));
  });
  outgoing.end(body);
  const tracked: Tracked = {
    id,
    stream,
    sentAt: Date.now(),
    afterShutdown: real.shutdownAt !== null,
    outgoing,
    client,
    upstream: { exchange: null, headersAt: null, activity: [], written: [], ended: null },
  };
  real.requests.push(tracked);
  return tracked;
}

/** The upstream's side of a request: parks each chat request until a command acts on it. */
function installUpstream(): void {
  upstream.route('POST', CHAT, (exchange) => {
    const content = (exchange.request.json as { messages: Array<{ content: string }> }).messages[0]!.content;
    const tracked = current?.requests[Number(content.slice('request '.length))];
    if (tracked === undefined) return;
    tracked.upstream.exchange = exchange;
    tracked.upstream.activity.push(Date.now());
    exchange.response.on('error', () => undefined);
    return new Promise<void>((resolve) => {
      exchange.response.once('close', () => resolve());
    });
  });
}

function isOpen(side: UpstreamSide): boolean {
  const response = side.exchange?.response;
  return side.ended === null && response !== undefined && !response.destroyed && !response.writableEnded;
}

function writeHead(tracked: Tracked): void {
  const side = tracked.upstream;
  const response = side.exchange!.response;
  if (side.headersAt !== null) return;
  response.writeHead(200, { 'content-type': tracked.stream ? 'text/event-stream' : 'application/json' });
  response.flushHeaders();
  side.headersAt = Date.now();
  side.activity.push(side.headersAt);
}

function write(tracked: Tracked, text: string): void {
  const side = tracked.upstream;
  const bytes = Buffer.from(text);
  side.written.push(bytes);
  side.exchange!.response.write(bytes);
  side.activity.push(Date.now());
}

let piece = 0;
const chunkText = (tracked: Tracked): string =>
  tracked.stream
    ? `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: `t${piece++}` } }] })}\n\n`
    : `${tracked.upstream.written.length === 0 ? '{"choices":[' : ''}{"index":${piece++}},`;

function finishUpstream(tracked: Tracked): void {
  writeHead(tracked);
  const closing = tracked.stream ? 'data: [DONE]\n\n' : `${tracked.upstream.written.length === 0 ? '{"choices":[' : ''}{"index":-1}]}`;
  write(tracked, closing);
  tracked.upstream.ended = { how: 'finish', at: Date.now() };
  tracked.upstream.exchange!.response.end();
}

// ---------------------------------------------------------------------------
// Commands.

class SendCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly stream: boolean) {}
  check(model: Readonly<Model>): boolean {
    return model.requests.length < MAX_REQUESTS;
  }
  async run(model: Model, real: Real): Promise<void> {
    const tracked = sendRequest(real, this.stream);
    model.requests.push({ open: !model.shutdown, headers: false, stream: this.stream });
    // Wait until the upstream has it (or the client has its answer: a 503 while draining).
    const deadline = Date.now() + 2_000;
    while (tracked.upstream.exchange === null && tracked.client.ending === null && tracked.client.status === null) {
      if (Date.now() > deadline) throw new Error(`request ${tracked.id} reached neither the upstream nor an answer`);
      await sleep(2);
    }
  }
  toString(): string {
    return `send(${this.stream ? 'stream' : 'json'})`;
  }
}

/** Acts on request `index` (modulo the requests sent) while the upstream may still act on it. */
abstract class UpstreamCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly index: number) {}
  protected target(model: Readonly<Model>): number {
    return this.index % Math.max(1, model.requests.length);
  }
  check(model: Readonly<Model>): boolean {
    return model.requests[this.target(model)]?.open === true;
  }
  async run(model: Model, real: Real): Promise<void> {
    const at = this.target(model);
    const tracked = track(real, at)!;
    // A timeout may have closed it already (the oracle knows when): then there is nothing to act on.
    if (isOpen(tracked.upstream)) this.act(tracked, model.requests[at]!);
    await sleep(5);
  }
  protected abstract act(tracked: Tracked, state: Model['requests'][number]): void;
  abstract toString(): string;
}

class ChunkCommand extends UpstreamCommand {
  protected act(tracked: Tracked, state: Model['requests'][number]): void {
    writeHead(tracked);
    state.headers = true;
    write(tracked, chunkText(tracked));
  }
  toString(): string {
    return `chunk(${this.index})`;
  }
}

class FinishCommand extends UpstreamCommand {
  protected act(tracked: Tracked, state: Model['requests'][number]): void {
    finishUpstream(tracked);
    state.open = false;
  }
  toString(): string {
    return `finish(${this.index})`;
  }
}

class ResetCommand extends UpstreamCommand {
  protected act(tracked: Tracked, state: Model['requests'][number]): void {
    tracked.upstream.ended = { how: 'reset', at: Date.now() };
    tracked.upstream.exchange!.response.socket?.resetAndDestroy();
    state.open = false;
  }
  toString(): string {
    return `reset(${this.index})`;
  }
}

class StatusCommand extends UpstreamCommand {
  constructor(
    index: number,
    readonly status: number,
  ) {
    super(index);
  }
  override check(model: Readonly<Model>): boolean {
    const state = model.requests[this.target(model)];
    return state?.open === true && !state.headers;
  }
  protected act(tracked: Tracked, state: Model['requests'][number]): void {
    const body = JSON.stringify({ error: { code: this.status, message: `upstream says ${this.status}`, type: 'server_error' } });
    tracked.upstream.ended = { how: 'status', at: Date.now(), status: this.status };
    tracked.upstream.written.push(Buffer.from(body));
    tracked.upstream.exchange!.response.writeHead(this.status, { 'content-type': 'application/json', 'retry-after': '3' });
    tracked.upstream.exchange!.response.end(body);
    state.open = false;
  }
  toString(): string {
    return `status(${this.index}, ${this.status})`;
  }
}

class ClientAbortCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly index: number) {}
  check(model: Readonly<Model>): boolean {
    return model.requests.length > 0;
  }
  async run(model: Model, real: Real): Promise<void> {
    const at = this.index % model.requests.length;
    const tracked = track(real, at)!;
    if (tracked.client.ending !== null || tracked.client.leftAt !== null) return;
    tracked.client.leftAt = Date.now();
    tracked.outgoing.destroy();
    model.requests[at]!.open = false;
    // The upstream sees the close (DESIGN: within 1 s), unless its answer had already ended.
    const deadline = Date.now() + 1_000;
    const side = tracked.upstream;
    while (side.exchange !== null && side.exchange.request.abortedAt === null && side.exchange.request.finishedAt === null && side.ended === null) {
      if (Date.now() > deadline) throw new Error(`request ${tracked.id}: the upstream did not see the client leave within 1 s`);
      await sleep(2);
    }
  }
  toString(): string {
    return `clientAbort(${this.index})`;
  }
}

/** Waits past the timeouts: every request the upstream holds open times out. Most draws are no-ops, so runs stay short. */
class StallCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly real: boolean) {}
  check(): boolean {
    return this.real;
  }
  async run(model: Model, real: Real): Promise<void> {
    real.stallsAt.push(Date.now());
    await sleep(MAX_IDLE_MS + 100);
    for (const state of model.requests) state.open = false;
  }
  toString(): string {
    return 'stall';
  }
}

class ShutdownCommand implements fc.AsyncCommand<Model, Real> {
  check(model: Readonly<Model>): boolean {
    return !model.shutdown;
  }
  async run(model: Model, real: Real): Promise<void> {
    model.shutdown = true;
    real.shutdownAt = Date.now();
    // As main.ts does: drain, then (here at once) end what is still in flight.
    real.proxy.app.proxy.startDraining();
    real.proxy.app.proxy.endInFlight();
    for (const state of model.requests) state.open = false;
    await sleep(5);
  }
  toString(): string {
    return 'shutdown';
  }
}

const commandArbitraries = [
  fc.boolean().map((stream) => new SendCommand(stream)),
  fc.boolean().map((stream) => new SendCommand(stream)),
  fc.nat(MAX_REQUESTS).map((index) => new ChunkCommand(index)),
  fc.nat(MAX_REQUESTS).map((index) => new ChunkCommand(index)),
  fc.nat(MAX_REQUESTS).map((index) => new FinishCommand(index)),
  fc.nat(MAX_REQUESTS).map((index) => new ResetCommand(index)),
  fc.tuple(fc.nat(MAX_REQUESTS), fc.constantFrom(400, 429, 500, 503)).map(([index, status]) => new StatusCommand(index, status)),
  fc.nat(MAX_REQUESTS).map((index) => new ClientAbortCommand(index)),
  fc.nat(9).map((draw) => new StallCommand(draw === 0)),
  fc.constant(new ShutdownCommand()),
];

// ---------------------------------------------------------------------------
// The oracle.

/**
 * When undici may time this request out. Its headers and body timers are
 * "fast timers" that tick every 499 ms: a timeout of 250 ms fires after 0.5
 * to 1 s without upstream activity, never sooner. `earliest` is when one
 * could first have fired, `latest` when one must have.
 */
function timeoutWindow(side: UpstreamSide, until: number): { earliest: number; latest: number } {
  let earliest = Number.POSITIVE_INFINITY;
  let latest = Number.POSITIVE_INFINITY;
  for (let index = 0; index < side.activity.length; index++) {
    const start = side.activity[index]!;
    const gap = (side.activity[index + 1] ?? until) - start;
    if (gap >= MIN_IDLE_MS && earliest === Number.POSITIVE_INFINITY) earliest = start + MIN_IDLE_MS;
    if (gap >= MAX_IDLE_MS && latest === Number.POSITIVE_INFINITY) latest = start + MAX_IDLE_MS;
  }
  return { earliest, latest };
}

/**
 * The causes that may have ended this request first (more than one when they
 * raced), and the earliest time one of them could have struck.
 */
function firstCauses(tracked: Tracked, real: Real, settledAt: number): { causes: Set<Cause>; from: number } {
  const side = tracked.upstream;
  const fixed: Array<[Cause, number]> = [];
  if (side.ended !== null) fixed.push([side.ended.how, side.ended.at]);
  if (tracked.client.leftAt !== null) fixed.push(['client', tracked.client.leftAt]);
  if (real.shutdownAt !== null) fixed.push(['shutdown', real.shutdownAt]);
  const first = fixed.length === 0 ? settledAt : Math.min(...fixed.map(([, at]) => at));
  const causes = new Set<Cause>(fixed.filter(([, at]) => at <= first + RACE_MS).map(([cause]) => cause));
  if (side.exchange !== null) {
    const { earliest, latest } = timeoutWindow(side, first);
    if (latest < first - RACE_MS) return { causes: new Set<Cause>(['timeout']), from: earliest };
    if (earliest <= first + RACE_MS) causes.add('timeout');
    return { causes, from: Math.min(first, earliest) };
  }
  return { causes, from: first };
}

interface Verdict {
  readonly ok: boolean;
  readonly why: string;
}

const fail = (why: string): Verdict => ({ ok: false, why });
const pass: Verdict = { ok: true, why: '' };

function errorCodeOf(body: string): string | undefined {
  try {
    return (JSON.parse(body) as { error?: { code?: unknown } }).error?.code as string | undefined;
  } catch {
    return undefined;
  }
}

/** Whether the client's outcome is the one `cause` calls for. */
function verdictFor(cause: Cause, tracked: Tracked): Verdict {
  const { client, upstream: side } = tracked;
  const body = Buffer.concat(client.body);
  const sent = Buffer.concat(side.written);
  const text = body.toString();
  // Whether the headers came first is the proxy's side of it, what the client
  // saw: the double may write its headers a moment before a shutdown (or the
  // settling finish after one) and the proxy still answer 503 in their place.
  // A 200 with no upstream headers behind it is judged as an error answer, and fails.
  const headersFirst = client.status === 200 && side.headersAt !== null;
  const events = sseData(text);
  const lastCode = events.length > 0 ? errorCodeOf(events.at(-1)!) : undefined;
  /** A started stream that failed: the bytes so far, then one error event, no [DONE]. */
  const streamFailed = (code: string): Verdict =>
    client.status === 200 && client.ending === 'ended' && body.subarray(0, sent.length).equals(sent) && lastCode === code && !text.includes('[DONE]')
      ? pass
      : fail(`expected the stream to end with an error event ${code}`);
  const answered = (status: number, code: string): Verdict =>
    client.status === status && errorCodeOf(text) === code ? pass : fail(`expected ${status} ${code}, got ${client.status} ${text.slice(0, 80)}`);
  // A JSON answer is read whole before its head goes out (issue 36: x-compactor carries the server's seconds), so
  // one that fails after the upstream's headers still gets an error answer of its own, never a cut connection.
  const jsonFailed = (status: number, codes: readonly string[]): Verdict =>
    client.status === status && codes.includes(errorCodeOf(text) ?? '') ? pass : fail(`expected ${status} ${codes.join(' or ')}, got ${client.status} ${text.slice(0, 80)}`);
  // A whole stream may end with compactor's comment of what the server spent (issue 36) after the upstream's bytes.
  const wholeAnswer = body.equals(sent) || (tracked.stream && body.subarray(0, sent.length).equals(sent) && /^: server [^\n]*\n\n$/.test(body.subarray(sent.length).toString()));
  switch (cause) {
    case 'client':
      return client.ending === 'aborted' ? pass : fail('expected the client to have left');
    case 'finish':
      // The upstream finished, but the client left before any of the relayed answer reached it (on a loaded
      // machine relaying takes longer than RACE_MS): from the client's side, it left first.
      if (client.leftAt !== null && client.status === null && client.ending === 'aborted') return pass;
      if (client.status !== 200 || client.ending !== 'ended' || !wholeAnswer) return fail('expected the whole answer, byte for byte');
      if (tracked.stream && events.at(-1) !== '[DONE]') return fail('expected [DONE] last');
      return pass;
    case 'status':
      return client.status === side.ended?.status && body.equals(sent) ? pass : fail('expected the upstream status passed through');
    case 'reset':
      if (!tracked.stream) return jsonFailed(502, side.headersAt === null ? ['upstream_unreachable'] : ['upstream_unreachable', 'upstream_stream_failed']);
      if (!headersFirst) return answered(502, 'upstream_unreachable');
      return streamFailed('upstream_stream_failed');
    case 'timeout':
      if (!tracked.stream || !headersFirst) return answered(504, 'upstream_timeout');
      return streamFailed('upstream_timeout');
    case 'shutdown':
      if (!tracked.stream || !headersFirst) return answered(503, 'shutting_down');
      return streamFailed('shutting_down');
  }
}

function checkRequest(tracked: Tracked, real: Real, settledAt: number): void {
  const label = `request ${tracked.id} (${tracked.stream ? 'stream' : 'json'})`;
  const { client, upstream: side } = tracked;
  expect(client.ending, `${label} settled`).not.toBeNull();
  if (tracked.afterShutdown) {
    seen.set('after shutdown', (seen.get('after shutdown') ?? 0) + 1);
    expect(side.exchange, `${label}: nothing upstream after the shutdown`).toBeNull();
    // A request sent after the shutdown began gets its 503 while compactor drains; one whose connection was
    // accepted as the server closed (in flight nothing, so every connection is closed) sees that connection
    // close with no answer (status null), as with any server that stops. Never anything else, never upstream.
    const refused = client.status === 503 && errorCodeOf(Buffer.concat(client.body).toString()) === 'shutting_down';
    const closedUnanswered = client.status === null && client.ending === 'error';
    expect(client.ending === 'aborted' || refused || closedUnanswered, `${label}: 503 while draining, or closed unanswered (got ${client.status} ${client.ending} ${Buffer.concat(client.body).toString().slice(0, 200)})`).toBe(true);
    return;
  }
  // One terminal state at most in what the client read: [DONE] or an error event, last.
  if (tracked.stream && client.status === 200) {
    const events = sseData(Buffer.concat(client.body).toString());
    const terminals = events.filter((data) => data === '[DONE]' || errorCodeOf(data) !== undefined);
    expect(terminals.length, `${label}: terminal events`).toBeLessThanOrEqual(1);
    if (terminals.length === 1) expect(events.at(-1), `${label}: the terminal event comes last`).toBe(terminals[0]);
  }
  const { causes, from } = firstCauses(tracked, real, settledAt);
  // The other half of judging from the client's side: a stream's headers the upstream sent well before anything
  // could end the request were passed on. A JSON answer's are not: it is read whole before its head goes out
  // (issue 36), so one that times out after its headers gets its own 504 (CI, seed -472037121, path 17).
  if (tracked.stream && side.headersAt !== null && side.headersAt < from - RACE_MS) expect(client.status, `${label}: the upstream's headers reached the client`).toBe(200);
  for (const cause of causes) seen.set(cause, (seen.get(cause) ?? 0) + 1);
  const verdicts = [...causes].map((cause) => [cause, verdictFor(cause, tracked)] as const);
  expect(
    verdicts.some(([, verdict]) => verdict.ok),
    `${label}: ${verdicts.map(([cause, verdict]) => `${cause}: ${verdict.why}`).join('; ')} (got ${client.status} ${client.ending} ${JSON.stringify(Buffer.concat(client.body).toString().slice(0, 200))})`,
  ).toBe(true);
  // The upstream request was aborted if and only if the answer did not end at the upstream's own word.
  if (side.exchange !== null) {
    const upstreamEnded = side.ended !== null && (side.ended.how === 'finish' || side.ended.how === 'status');
    const aborted = side.exchange.request.abortedAt !== null;
    if (upstreamEnded && causes.has(side.ended!.how) && causes.size === 1) expect(aborted, `${label}: the upstream not aborted`).toBe(false);
    if (!upstreamEnded && side.ended === null) expect(aborted, `${label}: the upstream aborted`).toBe(true);
  }
}

async function settle(real: Real): Promise<number> {
  // The upstream finishes whatever it still holds, so every request can end.
  for (const tracked of real.requests) if (isOpen(tracked.upstream)) finishUpstream(tracked);
  const settledAt = Date.now();
  const hang = sleep(5_000).then(() => 'hang' as const);
  for (const tracked of real.requests) {
    const outcome = await Promise.race([tracked.client.settled.then(() => 'settled' as const), hang]);
    if (outcome === 'hang') throw new Error(`request ${tracked.id} never ended`);
  }
  return settledAt;
}

async function waitFor(predicate: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 3_000;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

describe('model-based: clients, upstream faults and a shutdown', () => {
  it('property: one terminal state per request, the upstream aborted only when the client left or compactor ended it, nothing left in flight', async () => {
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(fc.commands(commandArbitraries, { maxCommands: 12 }), async (commands) => {
        upstream.reset();
        installUpstream();
        unhandled.length = 0;
        const proxy = await startProxy(upstream, { listen: true, config: { upstream: { timeouts: { headers_ms: TIMEOUT_MS, idle_ms: TIMEOUT_MS } } } });
        const real: Real = { proxy, requests: [], shutdownAt: null, stallsAt: [] };
        current = real;
        try {
          await fc.asyncModelRun(() => ({ model: { requests: [], shutdown: false }, real }), commands);
          const settledAt = await settle(real);
          for (const tracked of real.requests) checkRequest(tracked, real, settledAt);
          await waitFor(() => proxy.app.proxy.upstream.activeRequests === 0, 'the pool to have no request in flight');
          // One line per request that reached compactor (a client that left during its upload may have none).
          await waitFor(() => proxy.logs.requests().filter((line) => line['path'] === CHAT).length >= real.requests.filter((tracked) => tracked.client.status !== null || tracked.upstream.exchange !== null).length, 'a log line per request');
          expect(proxy.logs.requests().filter((line) => line['path'] === CHAT).length).toBeLessThanOrEqual(real.requests.length);
          expect(unhandled).toEqual([]);
          runs++;
        } finally {
          current = undefined;
          await proxy.close();
        }
      }),
      // The sequence CI drew that a stream-only oracle line failed: a JSON answer's headers, then a stall.
      { ...propertyParameters, endOnFailure: true, examples: [[[new SendCommand(false), new ChunkCommand(0), new StallCommand(true)]]] },
    );
    console.info(`model-based runs: ${runs}; requests by first cause: ${JSON.stringify(Object.fromEntries(seen))}`);
    for (const cause of ['finish', 'client', 'reset', 'status', 'shutdown'] as const) expect(seen.get(cause), cause).toBeGreaterThan(0);
  }, 120_000);
});
