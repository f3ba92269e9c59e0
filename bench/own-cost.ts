/**
 * compactor's own cost against the floor its framework allows (issue 26):
 * a minimal Fastify 5 proxy (bench/servers/fastify-proxy.ts) and the bare
 * undici pipe (bench/servers/bare-proxy.ts), measured interleaved with
 * compactor in one run, so every variant sees the same machine at about the
 * same moment. Prints a Markdown report and grades it against the targets.
 *
 *   npx tsx bench/own-cost.ts                      (3 rounds; ~10 minutes)
 *   npx tsx bench/own-cost.ts --warm=4000          (warm-up requests per variant and body; 20 s of its rate by default)
 *   npx tsx bench/own-cost.ts --quick              (1 short round, a smoke run)
 *   npx tsx bench/own-cost.ts --bodies=2k          (2k, 36k, 200k, or all three: the default)
 *   npx tsx bench/own-cost.ts --phase=growth       (work that grows with the conversation: 10 … 2,000 messages)
 *
 * Processes, pinned with taskset on a 2-core machine: CPU 0 the load (autocannon
 * in its own process, bench/servers/load.ts) and the upstream
 * (bench/servers/upstream.ts); CPU 1 the proxies, all started at once and
 * loaded one at a time.
 * Per variant and body, each round:
 * - CPU µs per request: the proxy's own user + system time (/proc) over a
 *   fixed offered load (c=32), divided by the requests answered;
 * - saturated req/s at c=32 and at c=1 (as many as it answers);
 * - the median latency of sequential requests (c=1) from this script, and
 *   the upstream's own the same way: what each proxy adds to it, against
 *   what the bare pipe adds (issue 40: ≤ 1.5×);
 * - for the 2 KB body, SSE time to first byte, sequential streams from this
 *   script (the upstream sends its first event at once).
 * With `--phase=growth`: CPU per request at c=1 for agent bodies of 10, 100,
 * 500 and 2,000 messages (~1 KB each, 10 KB … 2 MB), not triggered and with a
 * cached epoch, beside the minimal Fastify proxy on the same body (its parse is
 * the floor), and the cost per message, to show the growth is linear.
 * Targets (issue 26), against the minimal Fastify proxy of the same run:
 * not triggered ≤ 1.25× its CPU per request and ≥ 0.85× its saturated req/s;
 * cached epoch ≤ 1.6× and ≥ 0.7×; SSE added time to first byte ≤ 1 ms.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import { agentBody, chatBody, runLoad, sendRequests } from './load-client.js';

const quick = process.argv.includes('--quick');
const option = (name: string): string | undefined => process.argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3);
const rounds = Number(option('rounds') ?? (quick ? 1 : 3));
const seconds = Number(option('seconds') ?? (quick ? 2 : 4));
const streams = quick ? 50 : 200;
const latencyRequests = quick ? 100 : 300;
/** Warm-up requests per variant and body: `--warm`, or 20 s worth of the body's measured rate (20,000 at 2 KB). */
const warmRequestsOf = (body: Body): number => Number(option('warm') ?? (quick ? 2 : 20) * body.rate);
const phase = option('phase') ?? 'floor';
const LOAD_CPU = '0';
const PROXY_CPU = '1';
const BUILD = `node_modules/.cache/compactor-bench-${basename(process.cwd())}`;
// The 200 KB agent body is ~50k tokens, the growth phase's 2 MB ~500k: windows where each is still under
// the soft threshold, so "not triggered" holds (the cached epoch is made by max_messages, not by size).
const N_CTX = phase === 'growth' ? 2_000_000 : 262_144;

interface Body {
  readonly name: string;
  readonly json: string;
  readonly stream: string;
  /** Requests per second offered for the CPU-per-request measure: well under every variant's saturation. */
  readonly rate: number;
}
const BODIES: Record<string, Body> = {
  '2k': { name: '2 KB chat', json: chatBody('bench', false), stream: chatBody('bench', true), rate: 1000 },
  // Issue 40's cached epoch: a 36 KB agent conversation over the threshold (here by max_messages) with its epoch cached.
  '36k': { name: '36 KB agent', json: agentBody('bench', false, 36_000), stream: agentBody('bench', true, 36_000), rate: 300 },
  '200k': { name: '200 KB agent', json: agentBody('bench', false, 200_000), stream: agentBody('bench', true, 200_000), rate: 100 },
};
const bodies = (option('bodies') ?? '2k,36k,200k').split(',').map((name) => BODIES[name] ?? fail(`unknown body ${name}`));

function fail(message: string): never {
  throw new Error(message);
}

const children: ChildProcess[] = [];
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

async function start(name: string, cpu: string, script: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ name: string; child: ChildProcess; origin: string }> {
  const child = spawn('taskset', ['-c', cpu, process.execPath, `${BUILD}/${script}`, ...args], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], env: { ...process.env, ...env } });
  children.push(child);
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${name} exited (${code}) before listening`)));
    child.on('message', (message: { port?: number }) => {
      if (typeof message.port === 'number') resolve(message.port);
    });
  });
  return { name, child, origin: `http://127.0.0.1:${port}` };
}

/** User + system CPU of a process, in microseconds. */
function cpuMicros(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1_000_000) / 100;
}

const headers = { 'content-type': 'application/json', authorization: 'Bearer sk-bench' };
const CHAT = '/v1/chat/completions';

async function send(origin: string, body: string): Promise<string> {
  const pool = new Pool(origin, { connections: 1 });
  const response = await pool.request({ method: 'POST', path: CHAT, headers, body });
  await response.body.arrayBuffer();
  await pool.close();
  if (response.statusCode !== 200) throw new Error(`${origin}: ${response.statusCode}`);
  return String(response.headers['x-compactor'] ?? '');
}

/** Median time to the first byte of `count` sequential streams, in ms. */
async function timeToFirstByte(origin: string, body: string, count: number): Promise<number> {
  const pool = new Pool(origin, { connections: 1 });
  const times: number[] = [];
  for (let index = 0; index < count; index++) {
    const started = process.hrtime.bigint();
    const response = await pool.request({ method: 'POST', path: CHAT, headers, body });
    let first = true;
    for await (const _chunk of response.body) {
      if (first) times.push(Number(process.hrtime.bigint() - started) / 1e6);
      first = false;
    }
  }
  await pool.close();
  return median(times);
}

/** Median time of `count` sequential requests (c=1), in ms: the client's whole request and answer. */
async function latencyAtC1(origin: string, body: string, count: number): Promise<number> {
  const pool = new Pool(origin, { connections: 1 });
  const times: number[] = [];
  for (let index = 0; index < count; index++) {
    const started = process.hrtime.bigint();
    const response = await pool.request({ method: 'POST', path: CHAT, headers, body });
    await response.body.arrayBuffer();
    times.push(Number(process.hrtime.bigint() - started) / 1e6);
  }
  await pool.close();
  return median(times);
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length / 2;
  return sorted.length % 2 === 1 ? sorted[Math.floor(middle)]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

const load = (url: string, body: string, connections: number, rate?: number): ReturnType<typeof runLoad> =>
  runLoad(BUILD, { url, seconds, connections, headers, body, ...(rate === undefined ? {} : { rate }) }, LOAD_CPU);

// ---------------------------------------------------------------- the run

execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'bench/servers/tsconfig.json', '--outDir', BUILD], { stdio: 'inherit' });
const upstream = await start('upstream', LOAD_CPU, 'bench/servers/upstream.js', ['0'], { N_CTX: String(N_CTX) });
const compactor = (configuration: object): string[] => [upstream.origin, JSON.stringify({ ...configuration, log: { level: 'info' } })];
const variants = [
  await start('bare undici pipe', PROXY_CPU, 'bench/servers/bare-proxy.js', [upstream.origin]),
  await start('Fastify 5 minimal', PROXY_CPU, 'bench/servers/fastify-proxy.js', [upstream.origin]),
  await start('compactor, not triggered', PROXY_CPU, 'bench/servers/compactor.js', compactor({ compaction: { enabled: true } })),
  // max_messages 8: every body here is over the count threshold, so the first request summarizes and every later one applies that epoch.
  await start('compactor, cached epoch', PROXY_CPU, 'bench/servers/compactor.js', compactor({ compaction: { enabled: true, max_messages: 8 } })),
];
const FLOOR = 1;
const [notTriggered, cachedEpoch] = [variants[2]!, variants[3]!];

interface Sample {
  cpu: number[];
  saturated32: number[];
  saturated1: number[];
  /** Median latency of sequential requests (c=1), ms. */
  latency1: number[];
  ttfb: number[];
  /** CPU µs per request over the warm-up's requests, from the variant's first. */
  warmCpu: number[];
}
const samples = new Map<string, Sample>();
const sample = (body: Body, variant: string): Sample => {
  const key = `${body.name}|${variant}`;
  if (!samples.has(key)) samples.set(key, { cpu: [], saturated32: [], saturated1: [], latency1: [], ttfb: [], warmCpu: [] });
  return samples.get(key)!;
};

if (phase === 'growth') {
  await growth();
  for (const child of children) child.kill('SIGTERM');
  process.exit(0);
}

/** CPU per request at c=1 as the history grows: the variants that parse, side by side on each body. */
async function growth(): Promise<void> {
  const measured = [variants[FLOOR]!, notTriggered, cachedEpoch];
  console.log(`Work that grows with the conversation, CPU µs per request at c=1 (median of ${rounds} interleaved rounds of ${seconds} s), Node ${process.version}:`);
  console.log('');
  console.log(`| messages | body KiB | ${measured.map((variant) => `${variant.name} µs/req`).join(' | ')} | ${measured.map((variant) => `${variant.name} µs/message`).join(' | ')} |`);
  console.log(`|---|---|${measured.map(() => '---|').join('')}${measured.map(() => '---|').join('')}`);
  for (const count of [10, 100, 500, 2000]) {
    // Steps of an assistant call (~250 bytes) and a 1.7 KB result: about 1 KB a message.
    const body = agentBody('bench', false, count * 1060, 1700);
    const messages = (JSON.parse(body) as { messages: unknown[] }).messages.length;
    for (const variant of measured) await send(variant.origin, body);
    const reports = [await send(notTriggered.origin, body), await send(cachedEpoch.origin, body)];
    if (reports[0] !== '' && !reports[0]!.startsWith('forwarded')) throw new Error(`not triggered, yet: ${reports[0]}`);
    if (!reports[1]!.startsWith('epoch reused')) throw new Error(`the cached-epoch proxy did not reuse its epoch: ${reports[1]}`);
    const cpu = new Map<string, number[]>(measured.map((variant) => [variant.name, []]));
    for (let round = 1; round <= rounds; round++) {
      for (const variant of measured.map((_, index) => measured[(index + round) % measured.length]!)) {
        const before = cpuMicros(variant.child.pid!);
        const result = await load(`${variant.origin}${CHAT}`, body, 1);
        if (result.non2xx > 0 || result.errors > 0) throw new Error(`${variant.name}: ${result.non2xx} non-2xx, ${result.errors} errors`);
        cpu.get(variant.name)!.push((cpuMicros(variant.child.pid!) - before) / result.total);
      }
    }
    const medians = measured.map((variant) => median(cpu.get(variant.name)!));
    console.log(`| ${messages} | ${(body.length / 1024).toFixed(0)} | ${medians.map((value) => value.toFixed(0)).join(' | ')} | ${medians.map((value) => (value / messages).toFixed(1)).join(' | ')} |`);
  }
}

// Every variant answers each body once (the cached-epoch proxy makes its epoch), then warms up: `--warm` requests
// each, as many as it answers at c=32, then a load at the rate it is measured at. compactor's hot code is still being
// compiled for ~8,000 requests (bench/README.md § "Issue 40, third stop"): a warm-up of one 4 s load at 1,000 req/s
// graded its start, 1,377 req/s saturated where it answers ~3,600 once compiled (2026-12-02, `profile-request.ts
// --warm-seconds=2` and `=20`). A proxy runs for hours; the targets are about that, the start is a column of its own.
for (const body of bodies) {
  for (const variant of variants) await send(variant.origin, body.json);
  const reports = [await send(notTriggered.origin, body.json), await send(cachedEpoch.origin, body.json)];
  if (reports[0] !== '' && !reports[0]!.startsWith('forwarded')) throw new Error(`not triggered, yet: ${reports[0]}`);
  if (!reports[1]!.startsWith('epoch reused')) throw new Error(`the cached-epoch proxy did not reuse its epoch: ${reports[1]}`);
  for (const variant of variants) {
    const before = cpuMicros(variant.child.pid!);
    await sendRequests(variant.origin, warmRequestsOf(body), 32, headers, body.json);
    sample(body, variant.name).warmCpu.push((cpuMicros(variant.child.pid!) - before) / warmRequestsOf(body));
    await load(`${variant.origin}${CHAT}`, body.json, 32, body.rate);
  }
}

for (let round = 1; round <= rounds; round++) {
  for (const body of bodies) {
    // The upstream alone, at c=1: what a proxy's latency is added to.
    sample(body, 'upstream').latency1.push(await latencyAtC1(upstream.origin, body.json, latencyRequests));
    // Each round starts with a different variant, so none always runs first or last.
    const order = variants.map((_, index) => variants[(index + round) % variants.length]!);
    for (const variant of order) {
      const url = `${variant.origin}${CHAT}`;
      const before = cpuMicros(variant.child.pid!);
      const fixedRate = await load(url, body.json, 32, body.rate);
      const spent = cpuMicros(variant.child.pid!) - before;
      if (fixedRate.non2xx > 0 || fixedRate.errors > 0) throw new Error(`${variant.name}: ${fixedRate.non2xx} non-2xx, ${fixedRate.errors} errors`);
      const target = sample(body, variant.name);
      target.cpu.push(spent / fixedRate.total);
      target.saturated32.push((await load(url, body.json, 32)).average);
      target.saturated1.push((await load(url, body.json, 1)).average);
      target.latency1.push(await latencyAtC1(variant.origin, body.json, latencyRequests));
      if (body === BODIES['2k']) target.ttfb.push(await timeToFirstByte(variant.origin, body.stream, streams));
      await sleep(300);
    }
  }
  console.error(`round ${round} of ${rounds} done`);
}

// ---------------------------------------------------------------- the report

const range = (values: readonly number[], digits = 0): string =>
  values.length === 0 ? 'n/a' : `${median(values).toFixed(digits)} (${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)})`;
const load1 = readFileSync('/proc/loadavg', 'utf8').split(' ')[0];
console.log(`Own cost, ${rounds} interleaved rounds of ${seconds} s, Node ${process.version}, load average ${load1} at the end, window ${N_CTX}:`);
const verdicts: string[] = [];
for (const body of bodies) {
  const floor = sample(body, variants[FLOOR]!.name);
  console.log('');
  console.log(`### ${body.name} body (${(body.json.length / 1024).toFixed(0)} KiB, CPU measured at ${body.rate} req/s offered, c=32)`);
  console.log('');
  const direct = median(sample(body, 'upstream').latency1);
  const bareAdded = median(sample(body, variants[0]!.name).latency1) - direct;
  console.log(`Latency at c=1: the upstream alone ${direct.toFixed(3)} ms (median of the rounds' medians); added = a proxy's median − that.`);
  console.log('');
  console.log(`| variant | CPU µs/req median (min–max) | × Fastify CPU | saturated req/s c=32 | × Fastify | saturated req/s c=1 | × Fastify | added p50 c=1 ms | × bare pipe | SSE TTFB ms | CPU µs/req of the first ${warmRequestsOf(body)} (warm-up) |`);
  console.log('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const variant of variants) {
    const own = sample(body, variant.name);
    const cpuRatio = median(own.cpu) / median(floor.cpu);
    const throughputRatio = median(own.saturated32) / median(floor.saturated32);
    const throughput1Ratio = median(own.saturated1) / median(floor.saturated1);
    const added = median(own.latency1) - direct;
    console.log(
      `| ${variant.name} | ${range(own.cpu)} | ${cpuRatio.toFixed(2)}× | ${range(own.saturated32)} | ${throughputRatio.toFixed(2)}× | ${range(own.saturated1)} | ${throughput1Ratio.toFixed(2)}× | ${added.toFixed(3)} | ${(added / bareAdded).toFixed(2)}× | ${range(own.ttfb, 2)} | ${range(own.warmCpu)} |`,
    );
    const goal = variant === notTriggered ? { cpu: 1.25, throughput: 0.85 } : variant === cachedEpoch ? { cpu: 1.6, throughput: 0.7 } : undefined;
    if (goal === undefined) continue;
    const met = (ok: boolean): string => (ok ? 'met' : 'NOT met');
    verdicts.push(`${body.name}, ${variant.name}: CPU ${cpuRatio.toFixed(2)}× (goal ≤ ${goal.cpu}×, ${met(cpuRatio <= goal.cpu)}); saturated ${throughputRatio.toFixed(2)}× (goal ≥ ${goal.throughput}×, ${met(throughputRatio >= goal.throughput)}); added p50 at c=1 ${(added / bareAdded).toFixed(2)}× the bare pipe's (goal ≤ 1.5×, ${met(added / bareAdded <= 1.5)})`);
    if (own.ttfb.length > 0) {
      const added = median(own.ttfb) - median(floor.ttfb);
      verdicts.push(`${body.name}, ${variant.name}: SSE added time to first byte ${added.toFixed(2)} ms over Fastify (goal ≤ 1 ms, ${met(added <= 1)})`);
    }
  }
}
console.log('');
console.log('Against the targets (issues 26 and 40):');
for (const verdict of verdicts) console.log(`- ${verdict}`);
for (const child of children) child.kill('SIGTERM');
process.exit(0);
