/**
 * A soak of compactor (issue 7), not run in CI:
 *
 *   npx tsx bench/soak.ts [--minutes 30] [--probe-seconds 5]
 *
 * compactor runs in a process of its own (bench/soak-proxy.ts, with
 * --expose-gc so its heap can be measured after a collection), in front of
 * the simulated llama-server (an 8k window, a tokenizer, summaries) in this
 * process, which also drives the load:
 * 1. the maximum: closed-loop load of the same mix at rising concurrency, the
 *    best rate wins;
 * 2. then, at half that rate, open-loop: 70% streams, 20% non-streamed, 10%
 *    aborts and faults (client aborts mid-stream, upstream resets, stalls past
 *    the idle timeout, 503s), over 16 agent conversations that grow turn by
 *    turn (2 to 40 turns, so most need compaction) and start over;
 *    phases: warm-up (10%), steady (35%), a failing summarizer (20%: every
 *    summary call answers 500), steady (25%), idle (10%, at least 20 s).
 * Pass: the heap after GC at the end within ±5% of the one after warm-up;
 * file descriptors back to their count before any load (once the client has
 * closed its keep-alive connections); no 5xx (nor SSE error
 * event) compactor made of its own on a request without an injected fault;
 * one log line per request sent. It prints a Markdown report.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { conversation } from '../test/support/conversation.js';
import { FakeUpstream, replies } from '../test/support/fake-upstream.js';
import { SimulatedLlama } from '../test/support/simulated-llama.js';
import type { Measured } from './soak-proxy.js';

const CHAT = '/v1/chat/completions';
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

function argument(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  return at === -1 ? fallback : Number(process.argv[at + 1]);
}
const minutes = argument('minutes', 30);
const probeSeconds = argument('probe-seconds', 5);
// Short enough that a stalled stream ends within the soak's rhythm; long enough for any healthy answer here.
const IDLE_TIMEOUT_MS = 2_000;

// ---------------------------------------------------------------------------
// The upstream: the simulated llama-server, with faults on request.

type Kind = 'stream' | 'json' | 'abort' | 'reset' | 'stall' | 'unavailable';

const upstream = await FakeUpstream.start();
const llama = new SimulatedLlama(upstream, { window: 8192, summaryDelayMs: 20 });
upstream.route('POST', CHAT, (exchange) => {
  switch (exchange.request.headers['x-soak-fault']) {
    case 'reset':
      return replies.resetMidStream({ eventsBefore: 2 })(exchange);
    case 'stall':
      return replies.stall({ eventsBefore: 1 })(exchange);
    case 'unavailable':
      return replies.json(503, { error: { code: 503, message: 'Loading model', type: 'unavailable_error' } }, { 'retry-after': '1' })(exchange);
    default:
      return llama.chat(exchange);
  }
});

// ---------------------------------------------------------------------------
// The proxy, in its own process.

const logFile = join(mkdtempSync(join(tmpdir(), 'compactor-soak-')), 'proxy.log');
const proxyConfig = {
  upstream: { url: upstream.url, timeouts: { idle_ms: IDLE_TIMEOUT_MS } },
  // The epoch cache is a bounded LRU; at the default 10,000 entries it would still be filling when the
  // soak ends, and its growth would hide (or pass for) a leak. Full after the warm-up, it shows the steady state.
  cache: { max_entries: 256 },
  log: { level: 'info' },
};
const child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', join(ROOT, 'bench/soak-proxy.ts'), JSON.stringify(proxyConfig), logFile], {
  cwd: ROOT,
  stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
});
const port = await new Promise<number>((resolve, reject) => {
  child.once('message', (message: { kind: string; port: number }) => resolve(message.port));
  child.once('exit', (code) => reject(new Error(`the proxy exited (${code}) before listening`)));
});
const proxyUrl = `http://127.0.0.1:${port}`;

function measure(): Promise<Measured> {
  return new Promise((resolve) => {
    const onMessage = (message: Measured): void => {
      if (message.kind !== 'measured') return;
      child.off('message', onMessage);
      resolve(message);
    };
    child.on('message', onMessage);
    child.send({ kind: 'measure' });
  });
}

// ---------------------------------------------------------------------------
// Requests.

const CONVERSATIONS = 16;
const FIRST_TURN = 2;
const LAST_TURN = 40;
const turnOf = new Array<number>(CONVERSATIONS).fill(FIRST_TURN);
/** Each time a conversation starts over it is a new one (another system message): new prefixes, new epochs, new summaries. */
const generationOf = new Array<number>(CONVERSATIONS).fill(0);
const histories = new Map<number, ReturnType<typeof conversation>>();
let nextConversation = 0;

/** The next request of the next conversation: its whole history so far, as agents send it. */
function nextBody(stream: boolean): string {
  const index = nextConversation++ % CONVERSATIONS;
  const turns = turnOf[index]!;
  if (turns >= LAST_TURN) {
    turnOf[index] = FIRST_TURN;
    generationOf[index]!++;
  } else {
    turnOf[index] = turns + 1;
  }
  // The turns are the same from one generation to the next (built once); only the system message differs.
  let messages = histories.get(turns);
  if (messages === undefined) {
    messages = conversation({ turns });
    histories.set(turns, messages);
  }
  const system = { role: 'system', content: `You are soak agent ${index}, generation ${generationOf[index]}.` };
  return JSON.stringify({ model: 'sim', messages: [system, ...messages.slice(1)], stream, ...(stream ? { stream_options: { include_usage: true } } : {}) });
}

interface Outcome {
  readonly kind: Kind;
  readonly status: number;
  /** It ended as its kind should (a fault ending as that fault should). */
  readonly ok: boolean;
  /** A 5xx, or an SSE error event, that compactor made on a request without an injected fault. */
  readonly compactorFailure: boolean;
  readonly ms: number;
  readonly detail: string;
}

const pool = new Pool(proxyUrl, { connections: 256, pipelining: 1 });

function lastErrorCode(text: string): string | undefined {
  const at = text.lastIndexOf('data: {"error"');
  if (at === -1) return undefined;
  return /"code":"?([\w]+)"?/.exec(text.slice(at))?.[1];
}

async function send(kind: Kind): Promise<Outcome> {
  const started = performance.now();
  const stream = kind !== 'json';
  const fault = kind === 'reset' || kind === 'stall' || kind === 'unavailable' ? { 'x-soak-fault': kind } : {};
  const controller = new AbortController();
  try {
    const response = await pool.request({
      method: 'POST',
      path: CHAT,
      headers: { 'content-type': 'application/json', authorization: 'Bearer soak-client', ...fault },
      body: nextBody(stream),
      signal: controller.signal,
    });
    let text = '';
    for await (const chunk of response.body as AsyncIterable<Buffer>) {
      text += chunk.toString();
      if (kind === 'abort') controller.abort();
    }
    const ms = performance.now() - started;
    const status = response.statusCode;
    const code = lastErrorCode(text);
    const outcome = (ok: boolean, compactorFailure = false): Outcome => ({ kind, status, ok, compactorFailure, ms, detail: `${status} ${code ?? ''} ${text.slice(0, 120)}` });
    switch (kind) {
      case 'stream':
        return outcome(status === 200 && text.endsWith('data: [DONE]\n\n') && code === undefined, status >= 500 || code !== undefined);
      case 'json':
        return outcome(status === 200, status >= 500);
      case 'abort':
        // Answered whole before the first chunk could be read: still a sound answer.
        return outcome(status === 200, status >= 500 || code !== undefined);
      case 'reset':
        return outcome(status === 200 && code === 'upstream_stream_failed');
      case 'stall':
        return outcome(status === 200 && code === 'upstream_timeout');
      case 'unavailable':
        // Passed through; or, when progress comments already sent 200 (a summary was awaited), as an SSE error event.
        return outcome((status === 503 || (status === 200 && code === '503')) && text.includes('Loading model'));
    }
  } catch (error) {
    const ms = performance.now() - started;
    if (kind === 'abort' && controller.signal.aborted) return { kind, status: 200, ok: true, compactorFailure: false, ms, detail: 'aborted' };
    return { kind, status: 0, ok: false, compactorFailure: false, ms, detail: `client error: ${error instanceof Error ? error.message : String(error)}` };
  }
}

/** 70% streams, 20% non-streamed, 10% aborts and faults (2.5% each). */
function drawKind(withFaults: boolean): Kind {
  const draw = Math.random();
  if (!withFaults) return draw < 0.78 ? 'stream' : 'json';
  if (draw < 0.7) return 'stream';
  if (draw < 0.9) return 'json';
  return (['abort', 'reset', 'stall', 'unavailable'] as const)[Math.floor((draw - 0.9) * 40)] ?? 'abort';
}

// ---------------------------------------------------------------------------
// Load.

interface Tally {
  sent: number;
  readonly outcomes: Outcome[];
}
const tally: Tally = { sent: 0, outcomes: [] };

function record(outcome: Outcome): void {
  tally.outcomes.push(outcome);
}

/** Closed-loop load of the soak's own mix (faults and stalls included): what it sustains, in requests per second. */
async function closedLoop(concurrency: number, seconds: number): Promise<number> {
  const started = performance.now();
  const until = started + seconds * 1000;
  let done = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        tally.sent++;
        record(await send(drawKind(true)));
        done++;
      }
    }),
  );
  return done / ((performance.now() - started) / 1000);
}

const MAX_IN_FLIGHT = 1024;
let inFlight = 0;
let dropped = 0;

async function openLoop(rate: number, seconds: number, withFaults: boolean): Promise<void> {
  const started = performance.now();
  let launched = 0;
  const running = new Set<Promise<void>>();
  while (performance.now() - started < seconds * 1000) {
    const due = Math.floor(((performance.now() - started) / 1000) * rate);
    for (; launched < due; launched++) {
      if (inFlight >= MAX_IN_FLIGHT) {
        dropped++;
        continue;
      }
      inFlight++;
      tally.sent++;
      const request = send(drawKind(withFaults)).then((outcome) => {
        inFlight--;
        record(outcome);
      });
      running.add(request);
      void request.then(() => running.delete(request));
    }
    await sleep(5);
  }
  await Promise.all(running);
}

// The recorders of the test doubles keep every request; a soak would fill memory with them.
const trimmer = setInterval(() => {
  upstream.requests.length = 0;
  llama.records.length = 0;
}, 1_000);

// ---------------------------------------------------------------------------
// The run.

const samples: Array<{ at: string; measured: Measured; inFlight: number }> = [];
const startedAt = performance.now();
const clock = (): string => `${((performance.now() - startedAt) / 60_000).toFixed(1)} min`;
const log = (line: string): void => {
  process.stderr.write(`[soak ${clock()}] ${line}\n`);
};

const before = await measure();
log(`proxy up: heap ${(before.heapUsed / 2 ** 20).toFixed(1)} MiB, ${before.fds} fds`);

let maxRate = 0;
for (const concurrency of [8, 16, 32, 64]) {
  const rate = await closedLoop(concurrency, probeSeconds);
  log(`probe: ${concurrency} concurrent -> ${rate.toFixed(0)} req/s`);
  maxRate = Math.max(maxRate, rate);
}
const rate = maxRate / 2;
const probeRequests = tally.sent;
log(`maximum ${maxRate.toFixed(0)} req/s; soaking at ${rate.toFixed(0)} req/s for ${minutes} min`);

const sampler = setInterval(() => {
  void measure().then((measured) => {
    samples.push({ at: clock(), measured, inFlight });
    log(`heap ${(measured.heapUsed / 2 ** 20).toFixed(1)} MiB, rss ${(measured.rss / 2 ** 20).toFixed(0)} MiB, ${measured.fds} fds, ${measured.activeRequests} upstream in flight, ${measured.epochs} epochs, ${inFlight} client in flight, ${tally.sent} sent`);
  });
}, 30_000);

const total = minutes * 60;
const idleSeconds = Math.max(20, total * 0.1);
const phases: Array<{ name: string; seconds: number; summariesFail: boolean }> = [
  { name: 'warm-up', seconds: total * 0.1, summariesFail: false },
  { name: 'steady', seconds: total * 0.35, summariesFail: false },
  { name: 'failing summarizer', seconds: total * 0.2, summariesFail: true },
  { name: 'steady again', seconds: total * 0.25, summariesFail: false },
];
let afterWarmUp: Measured | undefined;
for (const phase of phases) {
  log(`phase: ${phase.name} (${phase.seconds.toFixed(0)} s)`);
  llama.summaryFailures = phase.summariesFail ? Number.MAX_SAFE_INTEGER : 0;
  await openLoop(rate, phase.seconds, true);
  if (phase.name === 'warm-up') {
    // Caches warm, JIT done, epochs made: the heap to compare the end with, taken at rest.
    await sleep(10_000);
    afterWarmUp = await measure();
    log(`after warm-up, at rest: heap ${(afterWarmUp.heapUsed / 2 ** 20).toFixed(2)} MiB, ${afterWarmUp.fds} fds`);
  }
}
llama.summaryFailures = 0;
log(`phase: idle (${idleSeconds.toFixed(0)} s)`);
await sleep(idleSeconds * 1000);
clearInterval(sampler);
// The client's keep-alive connections outlive any idle phase (undici keeps them as long as the server's
// Keep-Alive hint, 72 s): count them, then close them, so what is left is compactor's own.
const idle = await measure();
await pool.close();
await sleep(2_000);
const after = await measure();

child.send({ kind: 'stop' });
const exitCode = await new Promise<number | null>((resolve) => child.once('exit', resolve));
clearInterval(trimmer);
await upstream.close();

// ---------------------------------------------------------------------------
// The report.

const lines = readFileSync(logFile, 'utf8')
  .split('\n')
  .filter((line) => line !== '')
  .map((line) => JSON.parse(line) as Record<string, unknown>);
const requestLines = lines.filter((line) => line['msg'] === 'request' && line['path'] === CHAT);
const byKind = new Map<Kind, { count: number; ok: number; ms: number[] }>();
for (const outcome of tally.outcomes) {
  const entry = byKind.get(outcome.kind) ?? { count: 0, ok: 0, ms: [] };
  entry.count++;
  if (outcome.ok) entry.ok++;
  entry.ms.push(outcome.ms);
  byKind.set(outcome.kind, entry);
}
const compactorFailures = tally.outcomes.filter((outcome) => outcome.compactorFailure);
const notOk = tally.outcomes.filter((outcome) => !outcome.ok);
const percentile = (values: number[], fraction: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))] ?? Number.NaN;
};
const heapDrift = afterWarmUp === undefined ? Number.NaN : (after.heapUsed - afterWarmUp.heapUsed) / afterWarmUp.heapUsed;
const reports = lines.filter((line) => typeof line['msg'] === 'string' && /^(summarized|truncated|pruned)/.test(line['msg'] as string));
const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(2);

const verdicts = {
  heap: Math.abs(heapDrift) <= 0.05,
  fds: after.fds <= before.fds,
  failures: compactorFailures.length === 0,
  logs: requestLines.length === tally.sent,
  exit: exitCode === 0,
};
const mark = (ok: boolean): string => (ok ? 'pass' : 'FAIL');

process.stdout.write(`
### Soak, ${new Date().toISOString().slice(0, 10)}: ${minutes} min at half the maximum (${rate.toFixed(0)} of ${maxRate.toFixed(0)} req/s)

\`npx tsx bench/soak.ts --minutes ${minutes} --probe-seconds ${probeSeconds}\`, node ${process.version}, ${(await import('node:os')).cpus().length} cores.

| | |
|---|---|
| requests sent | ${tally.sent} (${probeRequests} while finding the maximum); ${dropped} not sent (over ${MAX_IN_FLIGHT} in flight) |
| heap after GC | ${mib(afterWarmUp?.heapUsed ?? Number.NaN)} MiB after warm-up, ${mib(after.heapUsed)} MiB at the end: ${(heapDrift * 100).toFixed(1)}% — ${mark(verdicts.heap)} |
| RSS | ${mib(before.rss)} MiB at start, ${mib(Math.max(...samples.map((sample) => sample.measured.rss), after.rss))} MiB at most, ${mib(after.rss)} MiB at the end |
| file descriptors | ${before.fds} before any load, ${Math.max(...samples.map((sample) => sample.measured.fds))} at most, ${idle.fds} after the idle phase with the client's keep-alive connections still open, ${after.fds} once the client closed them — ${mark(verdicts.fds)} |
| upstream requests in flight at the end | ${after.activeRequests} |
| compactor-made 5xx / SSE errors without a fault | ${compactorFailures.length} — ${mark(verdicts.failures)} |
| log lines for the chat route | ${requestLines.length} for ${tally.sent} requests — ${mark(verdicts.logs)} |
| compactions logged | ${reports.filter((line) => String(line['msg']).startsWith('summarized')).length} summarized, ${reports.filter((line) => String(line['msg']).startsWith('truncated')).length} truncated, ${reports.filter((line) => String(line['msg']).startsWith('pruned')).length} pruned; ${after.epochs} epochs cached at the end |
| drain and exit | exit code ${exitCode} — ${mark(verdicts.exit)} |

| kind | requests | as expected | p50 ms | p99 ms |
|---|---|---|---|---|
${[...byKind]
  .map(([kind, entry]) => `| ${kind} | ${entry.count} | ${entry.ok} | ${percentile(entry.ms, 0.5).toFixed(1)} | ${percentile(entry.ms, 0.99).toFixed(1)} |`)
  .join('\n')}
`);
if (notOk.length > 0) {
  process.stdout.write(`\nNot as expected (first 10):\n${notOk.slice(0, 10).map((outcome) => `- ${outcome.kind}: ${outcome.detail}`).join('\n')}\n`);
}
process.exit(Object.values(verdicts).every(Boolean) ? 0 : 1);
