/**
 * compactor against the floor, the physical limit of a Node proxy and a peer
 * gateway, side by side in one run (issue 6). Prints a Markdown report.
 *
 *   npm run bench                                  (= tsx bench/performance.ts; ~5 minutes)
 *   npm run bench -- --quick                       (shorter rounds, for a smoke run)
 *   npm run bench -- --only=latency,throughput     (some phases: latency, throughput, streams,
 *                                                   idle, sequential, planning)
 *   npm run bench -- --sequential=50000            (a longer memory run)
 *
 * Processes, each its own, pinned with taskset on a 2-core machine:
 * - CPU 0: the load generators (this script's undici client for latency
 *   and streams; autocannon for throughput, in a process of its own:
 *   bench/servers/load.ts) and the upstream, a lean llama-server stand-in
 *   (bench/servers/upstream.ts);
 * - CPU 1: the proxy being measured, one at a time under load.
 * Paths measured, all answered by the same upstream:
 * - direct: no proxy (the floor);
 * - bare undici: bench/servers/bare-proxy.ts, a ~30-line pass-through;
 * - bare undici + JSON.parse: the same, parsing each body first: the floor
 *   of any proxy that must read a chat request before forwarding it;
 * - Portkey: @portkey-ai/gateway 1.15.2 as its README starts it, provider
 *   `openai` with a custom host pointing at the upstream;
 * - compactor, compaction on but not triggered (the 2 KB history is far
 *   under the soft threshold of the 32k window `/props` reports);
 * - compactor, cached epoch: the same request with `max_messages: 8`, so it
 *   is over the count threshold, and the epoch made by an earlier request (a
 *   summary written by the upstream) is found and applied on every request.
 * - compactor, cached epoch, Redis store: the same with `cache.store: redis`
 *   on a redis-server this script starts (loopback, not pinned): every
 *   request makes its one lookup round trip (issue 15). Left out when
 *   redis-server is not on the PATH.
 * Every path gets the same client request (2 KB, 13 messages) and headers
 * (Portkey also gets its two routing headers).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus } from 'node:os';
import { basename } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import { holdIdleStreams } from './idle-stream-pool.js';
import { chatBody, runLoad } from './load-client.js';
import type { PlanningResult } from './planning-cpu.js';
import { RedisServer } from '../test/support/redis-server.js';

const quick = process.argv.includes('--quick');
const option = (name: string): string | undefined => process.argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3);
const PHASES = ['latency', 'throughput', 'streams', 'idle', 'sequential', 'planning'] as const;
type Phase = (typeof PHASES)[number];
const only = new Set((option('only') ?? PHASES.join(',')).split(',') as Phase[]);
const LOAD_CPU = '0';
const PROXY_CPU = '1';

const settings = quick
  ? { latencyRounds: 2, latencyPerRound: 300, latencyWarmup: 300, throughputRounds: 1, throughputSeconds: 3, streams: 8, idleStreams: 1000, sequential: 10_000, planningIterations: 20 }
  : { latencyRounds: 6, latencyPerRound: 1000, latencyWarmup: 1500, throughputRounds: 3, throughputSeconds: 6, streams: 40, idleStreams: 1000, sequential: 10_000, planningIterations: 80 };
settings.sequential = Number(option('sequential') ?? settings.sequential);
// Time for a proxy that was just loaded (Portkey above all) to finish its own work before the next one is measured on the same CPU.
const SETTLE_MS = 2000;

// ---------------------------------------------------------------- processes

const hasTaskset = (() => {
  try {
    execFileSync('taskset', ['-a', '-pc', LOAD_CPU, String(process.pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

interface Running {
  readonly name: string;
  readonly child: ChildProcess;
  readonly origin: string;
}

const children: ChildProcess[] = [];
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

function launch(cpu: string, command: string[], options: { env?: NodeJS.ProcessEnv; ipc?: boolean; quiet?: boolean } = {}): ChildProcess {
  const [file, ...args] = hasTaskset ? ['taskset', '-c', cpu, ...command] : command;
  const child = spawn(file!, args, {
    // Log lines go nowhere (but are written: their cost is part of the proxy). Portkey prints a stack per failed stream.
    stdio: ['ignore', 'ignore', options.quiet === true ? 'ignore' : 'inherit', ...(options.ipc === false ? [] : ['ipc' as const])],
    env: { ...process.env, ...options.env },
  });
  children.push(child);
  return child;
}

// The servers run compiled, on node alone, as compactor runs in production (bench/servers/tsconfig.json).
// One directory per checkout: worktrees may share one node_modules (a symlink), and a build must not land on another's.
const BUILD = `node_modules/.cache/compactor-bench-${basename(process.cwd())}`;
function compileServers(): void {
  execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'bench/servers/tsconfig.json', '--outDir', BUILD], { stdio: 'inherit' });
}

/** A server of bench/servers/ that reports `{ port }` over IPC once it listens. */
async function startScript(name: string, cpu: string, script: string, args: string[], nodeFlags: string[] = []): Promise<Running> {
  const compiled = `${BUILD}/${script.replace(/\.ts$/, '.js')}`;
  const child = launch(cpu, [process.execPath, ...nodeFlags, compiled, ...args]);
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${name} exited (${code}) before listening`)));
    child.on('message', (message: { port?: number }) => {
      if (typeof message.port === 'number') resolve(message.port);
    });
  });
  return { name, child, origin: `http://127.0.0.1:${port}` };
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return typeof address === 'object' && address !== null ? address.port : 0;
}

async function startPortkey(): Promise<Running> {
  const port = await freePort();
  const child = launch(PROXY_CPU, [process.execPath, 'bench/node_modules/@portkey-ai/gateway/build/start-server.js', `--port=${port}`, '--headless'], { ipc: false, quiet: true });
  const origin = `http://127.0.0.1:${port}`;
  for (let attempt = 0; attempt < 100; attempt++) {
    if (child.exitCode !== null) throw new Error(`Portkey exited (${child.exitCode})`);
    try {
      const response = await fetch(origin);
      await response.arrayBuffer();
      if (response.ok) return { name: 'Portkey', child, origin };
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  throw new Error('Portkey did not start');
}

async function stop(running: Running): Promise<void> {
  if (running.child.exitCode !== null) return;
  const exited = new Promise((resolve) => running.child.once('exit', resolve));
  running.child.kill('SIGTERM');
  await Promise.race([exited, sleep(3000).then(() => running.child.kill('SIGKILL'))]);
}

function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = /VmRSS:\s+(\d+) kB/.exec(status);
  return match === null ? Number.NaN : Number(match[1]) / 1024;
}

interface MemoryUsage {
  readonly rss: number;
  readonly heapUsed: number;
  readonly external: number;
  readonly arrayBuffers: number;
}

/** compactor's memory after a full collection (bench/servers/compactor.ts answers over IPC). */
function memoryOf(running: Running): Promise<MemoryUsage> {
  return new Promise((resolve) => {
    const onMessage = (message: { memory?: MemoryUsage }): void => {
      if (message.memory === undefined) return;
      running.child.off('message', onMessage);
      resolve(message.memory);
    };
    running.child.on('message', onMessage);
    running.child.send({ memory: true });
  });
}

// ---------------------------------------------------------------- requests

const CHAT_PATH = '/v1/chat/completions';
const BODY = chatBody('bench', false);
const STREAM_BODY = chatBody('bench', true);
const STALL_BODY = chatBody('bench-stall', true);

interface Target {
  readonly name: string;
  readonly origin: string;
  readonly headers: Record<string, string>;
  readonly pid?: number;
  readonly running?: Running;
}

const baseHeaders = { 'content-type': 'application/json', authorization: 'Bearer sk-bench' };

function percentile(sorted: readonly number[], fraction: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))] ?? Number.NaN;
}

function median(values: readonly number[]): number {
  return percentile([...values].sort((a, b) => a - b), 0.5);
}

async function sequential(target: Target, count: number, body = BODY): Promise<number[]> {
  const pool = new Pool(target.origin, { connections: 1 });
  const times: number[] = [];
  try {
    for (let index = 0; index < count; index++) {
      const started = performance.now();
      const response = await pool.request({ method: 'POST', path: CHAT_PATH, headers: target.headers, body });
      await response.body.arrayBuffer();
      times.push(performance.now() - started);
      if (response.statusCode !== 200) throw new Error(`${target.name}: status ${response.statusCode}`);
    }
  } finally {
    await pool.close();
  }
  return times;
}

async function throughput(target: Target, seconds: number): Promise<number> {
  const job = { url: target.origin + CHAT_PATH, seconds, connections: 32, headers: target.headers, body: BODY };
  const result = await runLoad(BUILD, job, hasTaskset ? LOAD_CPU : null);
  if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0) {
    throw new Error(`${target.name}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts under load`);
  }
  return result.average;
}

interface StreamTiming {
  readonly ttfb: number;
  readonly gaps: number[];
  readonly chunks: number;
}

async function streamOnce(pool: Pool, target: Target): Promise<StreamTiming> {
  const started = performance.now();
  const response = await pool.request({ method: 'POST', path: CHAT_PATH, headers: target.headers, body: STREAM_BODY });
  let ttfb = Number.NaN;
  let last = 0;
  const gaps: number[] = [];
  let chunks = 0;
  let text = '';
  for await (const chunk of response.body) {
    const now = performance.now();
    if (chunks === 0) ttfb = now - started;
    else gaps.push(now - last);
    last = now;
    chunks++;
    text += (chunk as Buffer).toString('utf8');
  }
  if (response.statusCode !== 200 || !text.includes('[DONE]')) throw new Error(`${target.name}: stream failed (${response.statusCode})`);
  return { ttfb, gaps, chunks };
}

/** Why a streamed request through `target` fails, or null when it streams. */
async function streamFailure(target: Target): Promise<string | null> {
  const response = await fetch(target.origin + CHAT_PATH, { method: 'POST', headers: target.headers, body: STREAM_BODY });
  const text = await response.text();
  return response.status === 200 && text.includes('[DONE]') ? null : `${response.status} ${text.slice(0, 120)}`;
}

/** Opens `count` streams the upstream never finishes, waits for each one's first event, and reads the proxy's RSS. */
async function idleStreams(target: Target, count: number): Promise<{ before: number; during: number; after: number }> {
  const pid = target.pid!;
  const before = rssMiB(pid);
  const streams = await holdIdleStreams(target.origin, count, { path: CHAT_PATH, headers: target.headers, body: STALL_BODY });
  await sleep(500);
  const during = rssMiB(pid);
  await streams.release();
  await sleep(1000);
  return { before, during, after: rssMiB(pid) };
}

// ---------------------------------------------------------------- the run

const compactorScript = 'bench/servers/compactor.ts';
const NOT_TRIGGERED = JSON.stringify({ compaction: { enabled: true }, log: { level: 'info' } });
// `max_messages: 8`: the 13-message history triggers a compaction by count (the window is the
// same 32k), which summarizes the old turns into a summary pair + the last messages; from then
// on every request hashes its prefix, finds that epoch and forwards 6 messages.
const CACHED_EPOCH = JSON.stringify({ compaction: { enabled: true, max_messages: 8 }, log: { level: 'info' } });
/** The cached epoch from a Redis store: the lookup is one script round trip per request; the store's 50 ms bound as shipped. */
const cachedEpochOnRedis = (url: string): string =>
  JSON.stringify({ compaction: { enabled: true, max_messages: 8 }, cache: { store: 'redis', redis: { url, key_prefix: 'bench:' } }, log: { level: 'info' } });

/** A redis-server of the run's own, or undefined when none is installed. */
async function startRedis(): Promise<RedisServer | undefined> {
  try {
    return await RedisServer.start();
  } catch {
    return undefined;
  }
}

async function startCompactor(name: string, upstream: Running, configuration: string): Promise<Running> {
  return startScript(name, PROXY_CPU, compactorScript, [upstream.origin, configuration], ['--expose-gc']);
}

/** The first request of the cached-epoch proxy compacts; every later one must reuse that epoch. */
async function warmEpoch(target: Target): Promise<string> {
  const pool = new Pool(target.origin, { connections: 1 });
  const reports: string[] = [];
  for (let index = 0; index < 3; index++) {
    const response = await pool.request({ method: 'POST', path: CHAT_PATH, headers: target.headers, body: BODY });
    await response.body.arrayBuffer();
    reports.push(String(response.headers['x-compactor'] ?? '(no report)'));
    await sleep(50);
  }
  await pool.close();
  if (!reports[0]!.startsWith('summarized') || !reports.slice(1).every((report) => report.startsWith('epoch reused'))) {
    throw new Error(`the cached-epoch proxy did not compact then reuse its epoch: ${reports.join(' | ')}`);
  }
  return reports[1]!;
}

function fixed(value: number, digits = 3): string {
  return Number.isFinite(value) ? value.toFixed(digits) : 'n/a';
}

interface Measured {
  readonly p50: Map<Target, number>;
  readonly p99: Map<Target, number>;
  readonly rates: Map<Target, number[]>;
  readonly streams: Map<Target, { ttfb: number; gap50: number; gap90: number; gap99: number; chunks: number }>;
  portkeyStream: string | null | undefined;
  readonly idle: Map<Target, { before: number; during: number; after: number }>;
  readonly growth: Map<string, { start: MemoryUsage; steps: MemoryUsage[] }>;
  planning: PlanningResult | undefined;
}

async function main(): Promise<void> {
  const started = new Date();
  const log = (line: string): void => console.error(`[${((Date.now() - started.getTime()) / 1000).toFixed(0)}s] ${line}`);
  if (!hasTaskset) log('taskset not found: processes are not pinned');
  compileServers();

  const upstream = await startScript('upstream', LOAD_CPU, 'bench/servers/upstream.ts', ['0']);
  const bare = await startScript('bare', PROXY_CPU, 'bench/servers/bare-proxy.ts', [upstream.origin]);
  const parsing = await startScript('bare-parse', PROXY_CPU, 'bench/servers/bare-proxy.ts', [upstream.origin, '--parse']);
  const nodePipe = await startScript('node-pipe', PROXY_CPU, 'bench/servers/bare-proxy.ts', [upstream.origin, '--node-pipe']);
  const plain = await startCompactor('compactor', upstream, NOT_TRIGGERED);
  const epoch = await startCompactor('compactor-epoch', upstream, CACHED_EPOCH);
  const redis = await startRedis();
  if (redis === undefined) log('redis-server not found: the Redis store is not measured');
  const epochOnRedis = redis === undefined ? undefined : await startCompactor('compactor-epoch-redis', upstream, cachedEpochOnRedis(redis.url));
  const portkey = await startPortkey();

  // Portkey last in every round: it is loaded hardest and longest, and the proxy measured after it must not share CPU 1 with its aftermath.
  const targets: Target[] = [
    { name: 'direct (no proxy)', origin: upstream.origin, headers: baseHeaders },
    { name: 'bare undici proxy', origin: bare.origin, headers: baseHeaders, pid: bare.child.pid!, running: bare },
    { name: 'bare undici proxy + JSON.parse', origin: parsing.origin, headers: baseHeaders, pid: parsing.child.pid!, running: parsing },
    { name: 'bare node:http pipe', origin: nodePipe.origin, headers: baseHeaders, pid: nodePipe.child.pid!, running: nodePipe },
    { name: 'compactor, not triggered', origin: plain.origin, headers: baseHeaders, pid: plain.child.pid!, running: plain },
    { name: 'compactor, cached epoch', origin: epoch.origin, headers: baseHeaders, pid: epoch.child.pid!, running: epoch },
    ...(epochOnRedis === undefined ? [] : [{ name: 'compactor, cached epoch, Redis store', origin: epochOnRedis.origin, headers: baseHeaders, pid: epochOnRedis.child.pid!, running: epochOnRedis }]),
    {
      name: 'Portkey gateway 1.15.2',
      origin: portkey.origin,
      headers: { ...baseHeaders, 'x-portkey-provider': 'openai', 'x-portkey-custom-host': `${upstream.origin}/v1` },
      pid: portkey.child.pid!,
      running: portkey,
    },
  ];
  const [direct, bareTarget, parseTarget, pipeTarget, plainTarget, epochTarget] = targets as [Target, Target, Target, Target, Target, Target];
  const portkeyTarget = targets.at(-1)!;
  const redisTarget = epochOnRedis === undefined ? undefined : targets[6]!;
  const epochReport = await warmEpoch(epochTarget);
  if (redisTarget !== undefined) log(`cached epoch, Redis store: ${await warmEpoch(redisTarget)}`);
  log(`cached epoch: ${epochReport}`);
  const measured: Measured = { p50: new Map(), p99: new Map(), rates: new Map(), streams: new Map(), portkeyStream: undefined, idle: new Map(), growth: new Map(), planning: undefined };

  // 1. Latency at concurrency 1: interleaved rounds, so noise and JIT warm-up fall on every path alike.
  if (only.has('latency')) {
    log('latency, concurrency 1');
    const latencies = new Map<Target, number[]>();
    for (const target of targets) await sequential(target, settings.latencyWarmup);
    for (let round = 0; round < settings.latencyRounds; round++) {
      for (const target of targets) {
        const times = latencies.get(target) ?? [];
        times.push(...(await sequential(target, settings.latencyPerRound)));
        latencies.set(target, times);
      }
    }
    for (const [target, times] of latencies) {
      times.sort((a, b) => a - b);
      measured.p50.set(target, percentile(times, 0.5));
      measured.p99.set(target, percentile(times, 0.99));
    }
  }

  // 2. Throughput at concurrency 32 (autocannon), interleaved rounds, median of the rounds.
  if (only.has('throughput')) {
    log('throughput, concurrency 32');
    // A short run each first: code paths under 32 concurrent requests are warmed apart from those of one at a time.
    for (const target of targets) {
      await throughput(target, 2);
      await sleep(SETTLE_MS);
    }
    for (let round = 0; round < settings.throughputRounds; round++) {
      for (const target of targets) {
        const list = measured.rates.get(target) ?? [];
        list.push(await throughput(target, settings.throughputSeconds));
        measured.rates.set(target, list);
        await sleep(SETTLE_MS);
      }
    }
  }

  // 3. Streams: 32 events 10 ms apart; time to first byte and the gaps between chunks.
  if (only.has('streams') || only.has('idle')) measured.portkeyStream = await streamFailure(portkeyTarget);
  if (only.has('streams')) {
    log('streams');
    // Portkey 1.15.2 answers every streamed chat request with a 500 on Node 20 (see bench/README.md): tried once, then left out.
    const streamTargets = measured.portkeyStream === null ? targets : targets.filter((target) => target !== portkeyTarget);
    const pools = new Map(streamTargets.map((target) => [target, new Pool(target.origin, { connections: 1 })]));
    const timings = new Map<Target, StreamTiming[]>();
    for (const target of streamTargets) await streamOnce(pools.get(target)!, target);
    for (let index = 0; index < settings.streams; index++) {
      for (const target of streamTargets) {
        const list = timings.get(target) ?? [];
        list.push(await streamOnce(pools.get(target)!, target));
        timings.set(target, list);
      }
    }
    for (const pool of pools.values()) await pool.close();
    for (const [target, list] of timings) {
      const gaps = list.flatMap((timing) => timing.gaps).sort((a, b) => a - b);
      measured.streams.set(target, {
        ttfb: median(list.map((timing) => timing.ttfb)),
        gap50: percentile(gaps, 0.5),
        gap90: percentile(gaps, 0.9),
        gap99: percentile(gaps, 0.99),
        chunks: list.reduce((sum, timing) => sum + timing.chunks, 0),
      });
    }
  }

  // 4. Memory with a thousand idle streams, per proxy.
  if (only.has('idle')) {
    log(`${settings.idleStreams} idle streams`);
    for (const target of [bareTarget, plainTarget, ...(measured.portkeyStream === null ? [portkeyTarget] : [])]) {
      measured.idle.set(target, await idleStreams(target, settings.idleStreams));
    }
  }
  for (const running of [bare, parsing, nodePipe, portkey, plain, epoch, ...(epochOnRedis === undefined ? [] : [epochOnRedis])]) await stop(running);
  await redis?.close();

  // 5. Memory over sequential requests: fresh processes, heap after a full collection every fifth of the run.
  if (only.has('sequential')) {
    log(`${settings.sequential} sequential requests`);
    for (const [name, configuration] of [
      ['compactor, not triggered', NOT_TRIGGERED],
      ['compactor, cached epoch', CACHED_EPOCH],
    ] as const) {
      const running = await startCompactor(name, upstream, configuration);
      const target: Target = { name, origin: running.origin, headers: baseHeaders };
      if (configuration === CACHED_EPOCH) await warmEpoch(target);
      // Warm-up: JIT code and inline caches settle first, so what follows is the requests' own footprint.
      await sequential(target, 2000);
      const start = await memoryOf(running);
      const steps: MemoryUsage[] = [];
      for (let step = 0; step < 5; step++) {
        await sequential(target, settings.sequential / 5);
        steps.push(await memoryOf(running));
      }
      measured.growth.set(name, { start, steps });
      await stop(running);
    }
  }

  // 6. Planning CPU on a 1 MB / 500-message history, on the proxy's core.
  if (only.has('planning')) {
    log('planning CPU');
    const output = execFileSync(
      hasTaskset ? 'taskset' : process.execPath,
      [...(hasTaskset ? ['-c', PROXY_CPU, process.execPath] : []), '--import', 'tsx', 'bench/planning-cpu.ts', String(settings.planningIterations), '--json'],
      { encoding: 'utf8' },
    );
    measured.planning = JSON.parse(output.trim().split('\n').at(-1)!) as PlanningResult;
  }
  await stop(upstream);
  console.log(report({ started, targets, direct, bareTarget, parseTarget, pipeTarget, plainTarget, epochTarget, redisTarget, portkeyTarget, epochReport, measured }));
}

function report(run: {
  started: Date;
  targets: Target[];
  direct: Target;
  bareTarget: Target;
  pipeTarget: Target;
  parseTarget: Target;
  plainTarget: Target;
  epochTarget: Target;
  redisTarget: Target | undefined;
  portkeyTarget: Target;
  epochReport: string;
  measured: Measured;
}): string {
  const { started, targets, direct, bareTarget, parseTarget, pipeTarget, plainTarget, epochTarget, redisTarget, portkeyTarget, epochReport, measured } = run;
  const { p50, p99, streams, idle, growth, planning } = measured;
  const rate = (target: Target): number => median(measured.rates.get(target) ?? [Number.NaN]);
  const spread = (target: Target): string => {
    const list = measured.rates.get(target);
    return list === undefined || list.length < 2 ? '' : ` (${fixed(Math.min(...list), 0)}–${fixed(Math.max(...list), 0)})`;
  };
  const added = (target: Target): number => (p50.get(target) ?? Number.NaN) - (p50.get(direct) ?? Number.NaN);
  const noStream = { ttfb: Number.NaN, gap50: Number.NaN, gap90: Number.NaN, gap99: Number.NaN, chunks: Number.NaN };
  const lines: string[] = [];
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  lines.push(
    `Run of ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC: \`${process.argv.length > 2 ? `npm run bench -- ${process.argv.slice(2).join(' ')}` : 'npm run bench'}\`, ` +
      `Node ${process.version}, ${cpus().length} × ${cpu}, ` +
      `${hasTaskset ? `load generators and upstream on CPU ${LOAD_CPU}, each proxy on CPU ${PROXY_CPU}` : 'not pinned'}.`,
  );
  lines.push('');
  lines.push(`| path | p50 ms (c=1) | p99 ms (c=1) | added p50 ms | req/s (c=32), median (min–max) | stream TTFB ms | chunk gap p50 / p90 / p99 ms | chunks received of ${settings.streams * 32} | RSS idle → 1,000 idle streams (MiB) |`);
  lines.push('|---|---|---|---|---|---|---|---|---|');
  for (const target of targets) {
    const stats = streams.get(target) ?? noStream;
    const memory = idle.get(target);
    lines.push(
      `| ${target.name} | ${fixed(p50.get(target) ?? Number.NaN)} | ${fixed(p99.get(target) ?? Number.NaN)} | ${target === direct ? '' : fixed(added(target))} | ` +
        `${fixed(rate(target), 0)}${spread(target)} | ${fixed(stats.ttfb)} | ${fixed(stats.gap50, 2)} / ${fixed(stats.gap90, 2)} / ${fixed(stats.gap99, 2)} | ${fixed(stats.chunks, 0)} | ` +
        `${memory === undefined ? '' : `${fixed(memory.before, 0)} → ${fixed(memory.during, 0)}`} |`,
    );
  }
  lines.push('');
  if (redisTarget !== undefined) {
    // Issue 15: what the Redis store costs a request past the soft threshold, against the memory store in the same run.
    const overMemory = (p50.get(redisTarget) ?? Number.NaN) - (p50.get(epochTarget) ?? Number.NaN);
    lines.push(
      `Redis store against memory, cached epoch (one lookup round trip per request): added p50 ${fixed(overMemory)} ms (c=1); ` +
        `throughput c=32 ${fixed(rate(redisTarget), 0)} against ${fixed(rate(epochTarget), 0)} req/s (${fixed(rate(redisTarget) / rate(epochTarget), 2)}×).`,
    );
    lines.push('');
  }

  const goals: Array<[string, string, string, boolean]> = [];
  for (const target of [plainTarget, epochTarget]) {
    const label = target === plainTarget ? 'not triggered' : 'cached epoch';
    if (p50.size > 0) {
      goals.push([`added p50, 2 KB, c=1 (${label})`, '≤ 0.5 ms over direct', `${fixed(added(target))} ms`, added(target) <= 0.5]);
      const versusBare = added(target) / added(bareTarget);
      goals.push([`added p50 vs bare undici (${label})`, '≤ 1.5×', `${fixed(versusBare, 2)}× (${fixed(added(target))} / ${fixed(added(bareTarget))} ms)`, versusBare <= 1.5]);
      const versusPipe = added(target) / added(pipeTarget);
      goals.push([`added p50 vs bare node:http pipe (${label})`, '≤ 1.5×', `${fixed(versusPipe, 2)}× (${fixed(added(target))} / ${fixed(added(pipeTarget))} ms)`, versusPipe <= 1.5]);
    }
    if (measured.rates.size > 0) {
      const overBare = rate(target) / rate(bareTarget);
      const floor = rate(parseTarget) / rate(bareTarget);
      // Issue 18's targets: the not-triggered path parses and logs; the cached epoch also hashes and re-serializes.
      // Issue 26 replaced them by targets against a minimal Fastify proxy, graded by bench/own-cost.ts.
      const wanted = target === plainTarget ? 0.75 : 0.6;
      goals.push([
        `throughput c=32 vs bare undici (${label})`,
        `≥ ${wanted}×`,
        `${fixed(overBare, 2)}× (${fixed(rate(target), 0)} / ${fixed(rate(bareTarget), 0)} req/s); bare undici + JSON.parse alone: ${fixed(floor, 2)}×`,
        overBare >= wanted,
      ]);
      const overPortkey = rate(target) / rate(portkeyTarget);
      goals.push([`throughput c=32 vs Portkey (${label})`, '≥ 3×', `${fixed(overPortkey, 2)}× (${fixed(rate(target), 0)} / ${fixed(rate(portkeyTarget), 0)} req/s)`, overPortkey >= 3]);
    }
    const stats = streams.get(target);
    const directStream = streams.get(direct);
    const bareStream = streams.get(bareTarget);
    if (stats !== undefined && directStream !== undefined && bareStream !== undefined) {
      const ttfbAdded = stats.ttfb - directStream.ttfb;
      goals.push([`stream TTFB added (${label})`, '≤ 1 ms', `${fixed(ttfbAdded)} ms (bare undici: ${fixed(bareStream.ttfb - directStream.ttfb)} ms)`, ttfbAdded <= 1]);
      const gap50 = stats.gap50 - directStream.gap50;
      const gap90 = stats.gap90 - bareStream.gap90;
      // Two events merge into one chunk when a reader was descheduled across the 10 ms between them: any
      // extra hop on a shared CPU can cause it now and then, so the bare proxy is the reference, give or take 1 in 500.
      const mergeTolerance = Math.ceil(0.002 * settings.streams * 32);
      goals.push([
        `no added gap between chunks (${label})`,
        'p50 gap within 0.1 ms of direct; p90 within 0.25 ms of bare undici; chunks merged no more than through bare undici (± 1 in 500)',
        `p50 ${fixed(gap50)} ms over direct; p90 ${fixed(gap90)} ms over bare undici; ${fixed(stats.chunks, 0)} chunks (bare undici ${fixed(bareStream.chunks, 0)}, direct ${fixed(directStream.chunks, 0)})`,
        Math.abs(gap50) <= 0.1 && gap90 <= 0.25 && stats.chunks >= bareStream.chunks - mergeTolerance,
      ]);
    }
  }
  if (planning !== undefined) {
    const ratio = planning.cachedEpochMs / planning.parseStringifyMs;
    goals.push([
      `planning CPU, ${(planning.bodyBytes / 1024 / 1024).toFixed(2)} MiB / ${planning.messages} messages, cached epoch`,
      '≤ 2× JSON.parse + JSON.stringify',
      `${fixed(ratio, 2)}× (${fixed(planning.cachedEpochMs, 2)} / ${fixed(planning.parseStringifyMs, 2)} ms)`,
      ratio <= 2,
    ]);
    goals.push([
      'under the soft threshold, no hashing',
      'the hash chain is skipped',
      `test/compaction/fast-path.test.ts asserts it; planning there takes ${fixed(planning.underSoftMs, 2)} ms (the hash chain alone: ${fixed(planning.hashChainMs, 2)} ms)`,
      true,
    ]);
  }
  const plainIdle = idle.get(plainTarget);
  if (plainIdle !== undefined) {
    goals.push([`RSS with ${settings.idleStreams} idle streams (compactor)`, '≤ 150 MB', `${fixed(plainIdle.during, 0)} MiB (${fixed(plainIdle.during * 1.048576, 0)} MB)`, plainIdle.during * 1.048576 <= 150]);
  }
  for (const [name, { start, steps }] of growth) {
    const end = steps.at(-1)!;
    const heapGrowth = (end.heapUsed - start.heapUsed) / 1048576;
    goals.push([
      `no growth over ${settings.sequential} sequential requests (${name})`,
      'heap after a full GC within 1 MiB of the start',
      `heap ${[start, ...steps].map((usage) => fixed(usage.heapUsed / 1048576, 1)).join(' → ')} MiB; RSS ${fixed(start.rss / 1048576, 0)} → ${fixed(end.rss / 1048576, 0)} MiB`,
      Math.abs(heapGrowth) <= 1,
    ]);
  }
  lines.push('| goal | target | measured | met |');
  lines.push('|---|---|---|---|');
  for (const [goal, target, value, met] of goals) lines.push(`| ${goal} | ${target} | ${value} | ${met ? 'yes' : '**no**'} |`);
  lines.push('');
  if (planning !== undefined) {
    lines.push(
      `Planning CPU (median of ${settings.planningIterations}, ${planning.bodyBytes} bytes): JSON.parse + JSON.stringify ${fixed(planning.parseStringifyMs, 2)} ms; ` +
        `planning with a cached epoch ${fixed(planning.cachedEpochMs, 2)} ms (forwards ${planning.forwardedMessages} messages); ` +
        `under the soft threshold ${fixed(planning.underSoftMs, 2)} ms; the prefix hash chain alone ${fixed(planning.hashChainMs, 2)} ms.`,
    );
  }
  if (measured.portkeyStream !== null && measured.portkeyStream !== undefined) {
    lines.push(`Portkey, streamed: \`${measured.portkeyStream.replace(/\s+/g, ' ')}\` (streams and idle streams not measured).`);
  }
  lines.push(`Cached-epoch path: \`x-compactor: ${epochReport}\`.`);
  return lines.join('\n');
}

await main();
process.exit(0);
