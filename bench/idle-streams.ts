/**
 * compactor's memory with 1,000 idle streams, fresh and after a load burst
 * (issue 26: "RSS with 1,000 idle streams stays ≤ 150 MB, also after a load
 * burst"). compactor runs as `npm start` runs it: its compiled main
 * (src/main.ts, configured by COMPACTOR_* variables, logging at info), with
 * no flag of the bench's own, in front of bench/servers/upstream.ts, which
 * holds every `bench-stall` stream open and sends a token event every
 * `STALL_CHUNK_MS` (2 s) meanwhile.
 *
 *   npx tsx bench/idle-streams.ts                          (bursts of 2 KB and of 200 KB bodies, one fresh process each)
 *   npx tsx bench/idle-streams.ts --bursts=200k --idle-body=200k   (idle streams of agent-sized requests)
 *   npx tsx bench/idle-streams.ts --variant="MALLOC_ARENA_MAX=2 --max-semi-space-size=4"   (also run that way, in the same run)
 *   npx tsx bench/idle-streams.ts --snapshots=DIR          (heap snapshots into DIR: fresh at rest, then with the streams open, fresh and after the burst)
 *   npx tsx bench/idle-streams.ts --base=main [--swap]     (that revision's build too, first; with --swap after the working tree's)
 *
 * Per burst body and variant, one fresh compactor: RSS (VmRSS from /proc) at rest, with
 * the idle streams open, after they closed; then a burst of `--seconds` (6)
 * at c=32 (autocannon in its own process; a fixed number of requests, about
 * 6 s on a quiet machine, unless `--saturate`: `--seconds` of as many as it
 * answers); then the idle streams again at once, and `--rest-seconds`
 * (30) later. Beside each RSS, what /metrics says of the heap (used,
 * total) and of external memory: no collection is forced, so heap used is
 * what it happens to be, garbage included. Beside them, V8's young
 * generation (its committed new space: two semi-spaces, which only a
 * memory-reducing collection shrinks) and RSS outside V8's heap (malloc's
 * arenas, the node binary's pages, stacks).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { basename, resolve } from 'node:path';
import { buildRevision } from './build-revision.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { holdIdleStreams } from './idle-stream-pool.js';
import { agentBody, chatBody, runLoad } from './load-client.js';

const option = (name: string, fallback: string): string => process.argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const STREAMS = Number(option('streams', '1000'));
const SECONDS = Number(option('seconds', '6'));
const bursts = option('bursts', '2k,200k').split(',');
const idleBodyName = option('idle-body', '2k');
const snapshots = option('snapshots', '');
const snapshotFlags = snapshots === '' ? [] : ['--heapsnapshot-signal=SIGUSR2'];
const BUILD = `node_modules/.cache/compactor-bench-${basename(process.cwd())}`;
const CHAT = '/v1/chat/completions';
const headers = { 'content-type': 'application/json', authorization: 'Bearer sk-bench' };

const BODIES: Record<string, (model: string, stream: boolean) => string> = {
  '2k': (model, stream) => chatBody(model, stream),
  '200k': (model, stream) => agentBody(model, stream, 200_000),
};
// The burst's work, the same for every variant however busy the machine, so their memory compares: about 6 s at
// c=32 on a quiet machine (own-cost.ts measured ~5,000 and ~500 req/s); `--saturate`: for `--seconds` instead.
const AMOUNTS: Record<string, number> = { '2k': 30_000, '200k': 3_000 };
const saturate = process.argv.includes('--saturate');
const bodyOf = (name: string, model: string, stream: boolean): string => (BODIES[name] ?? fail(`unknown body ${name}`))(model, stream);
const IDLE_BODY = bodyOf(idleBodyName, 'bench-stall', true);

function fail(message: string): never {
  throw new Error(message);
}

const children: ChildProcess[] = [];
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return typeof address === 'object' && address !== null ? address.port : fail('no port');
}

async function startUpstream(): Promise<{ child: ChildProcess; origin: string }> {
  // A window where the 200 KB body (~50k tokens) is not triggered: the burst is of ordinary, forwarded requests.
  const env = { ...process.env, N_CTX: '262144', STALL_CHUNK_MS: '2000' };
  const child = spawn(process.execPath, [`${BUILD}/bench/servers/upstream.js`, '0'], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], env });
  children.push(child);
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`upstream exited (${code})`)));
    child.on('message', (message: { port?: number }) => {
      if (typeof message.port === 'number') resolve(message.port);
    });
  });
  return { child, origin: `http://127.0.0.1:${port}` };
}

/** compactor's compiled main, configured as a user would: variables, defaults for the rest. */
async function startCompactor(upstream: string, variant: Variant): Promise<{ child: ChildProcess; origin: string }> {
  const port = await freePort();
  const env = { ...process.env, NODE_ENV: 'production', COMPACTOR_HOST: '127.0.0.1', COMPACTOR_PORT: String(port), COMPACTOR_UPSTREAM_URL: upstream, ...variant.env };
  const main = resolve(variant.build, 'src/main.js');
  const child = spawn(process.execPath, [...snapshotFlags, ...variant.flags, main], { stdio: ['ignore', 'ignore', 'inherit'], env, ...(snapshots === '' ? {} : { cwd: snapshots }) });
  children.push(child);
  const origin = `http://127.0.0.1:${port}`;
  for (let attempt = 0; attempt < 200; attempt++) {
    if (child.exitCode !== null) fail(`compactor exited (${child.exitCode})`);
    try {
      const response = await fetch(`${origin}/healthz`);
      await response.arrayBuffer();
      if (response.ok) return { child, origin };
    } catch {
      // not listening yet
    }
    await sleep(50);
  }
  return fail('compactor did not start');
}

interface Reading {
  readonly rss: number;
  readonly heapUsed: number;
  readonly heapTotal: number;
  readonly external: number;
  /** V8's committed new space (both semi-spaces). */
  readonly newSpace: number;
}

const MiB = 1024 * 1024;

async function reading(pid: number, origin: string, snapshot = false): Promise<Reading> {
  const rss = Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;
  // Written on the main thread after a full collection: /metrics below answers once it is done, with the heap after that collection.
  if (snapshot && snapshots !== '') process.kill(pid, 'SIGUSR2');
  const text = await (await fetch(`${origin}/metrics`)).text();
  const gauge = (name: string): number => Number(text.split('\n').find((line) => line.startsWith(`${name} `))?.split(' ')[1] ?? Number.NaN);
  return {
    rss,
    heapUsed: gauge('nodejs_heap_size_used_bytes'),
    heapTotal: gauge('nodejs_heap_size_total_bytes'),
    external: gauge('nodejs_external_memory_bytes'),
    newSpace: gauge('nodejs_heap_space_size_total_bytes{space="new"}'),
  };
}

/** Opens `count` streams the upstream holds open, waits for each one's first event, reads, then closes them all. */
async function withIdleStreams(origin: string, count: number, read: () => Promise<Reading>): Promise<Reading> {
  const streams = await holdIdleStreams(origin, count, {
    path: CHAT,
    headers,
    body: IDLE_BODY,
    onStatus: (status) => {
      if (status !== 200) fail(`idle stream: ${status}`);
    },
  });
  // Two of the upstream's trickled chunks pass through every stream meanwhile.
  await sleep(4500);
  const during = await read();
  await streams.release();
  await sleep(1000);
  return during;
}

const mib = (value: number): string => (value / MiB).toFixed(0);

/** User + system CPU of a process, in microseconds. */
function cpuMicros(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1_000_000) / 100;
}

interface Variant {
  readonly label: string;
  /** The compiled tree it runs: the working tree's, or `--base`'s. */
  readonly build: string;
  readonly flags: readonly string[];
  readonly env: Readonly<Record<string, string>>;
}

/** `--variant="--a-node-flag KEY=value …"`: another way to run compactor, measured beside the plain one in the same run. */
function variantOf(words: string): Variant {
  const parts = words.split(' ').filter((word) => word !== '');
  const env = Object.fromEntries(parts.filter((word) => !word.startsWith('--')).map((word) => [word.slice(0, word.indexOf('=')), word.slice(word.indexOf('=') + 1)]));
  return { label: words, build: BUILD, flags: parts.filter((word) => word.startsWith('--')), env };
}
const base = option('base', '');
const working: Variant = { label: base === '' ? 'as `npm start` runs it' : 'working tree, as `npm start` runs it', build: BUILD, flags: [], env: {} };
// The base's build first, unless `--swap`: what runs second on this machine may read differently, so a change is read both ways.
const builds: Variant[] = base === '' ? [working] : [{ label: `${base}, as \`npm start\` runs it`, build: buildRevision(process.cwd(), base), flags: [], env: {} }, working];
if (process.argv.includes('--swap')) builds.reverse();
const variants: Variant[] = [...builds, ...process.argv.filter((arg) => arg.startsWith('--variant=')).map((arg) => variantOf(arg.slice('--variant='.length)))];

async function measure(burst: string, variant: Variant): Promise<string> {
  const compactor = await startCompactor(upstream.origin, variant);
  const pid = compactor.child.pid!;
  const read = (): Promise<Reading> => reading(pid, compactor.origin);
  const readWithSnapshot = (): Promise<Reading> => reading(pid, compactor.origin, true);
  const fresh = await reading(pid, compactor.origin, true);
  const freshStreams = await withIdleStreams(compactor.origin, STREAMS, readWithSnapshot);
  const body = bodyOf(burst, 'bench', false);
  const cpuBefore = cpuMicros(pid);
  const amount = saturate ? {} : { amount: AMOUNTS[burst]! };
  const result = await runLoad(BUILD, { url: `${compactor.origin}${CHAT}`, seconds: SECONDS, connections: 32, headers, body, ...amount }, null);
  const cpu = (cpuMicros(pid) - cpuBefore) / result.total;
  if (result.non2xx > 0 || result.errors > 0) fail(`burst: ${result.non2xx} non-2xx, ${result.errors} errors`);
  const afterBurst = await read();
  await sleep(2000);
  const burstStreams = await withIdleStreams(compactor.origin, STREAMS, readWithSnapshot);
  await sleep(REST_MS);
  const rested = await read();
  const restedStreams = await withIdleStreams(compactor.origin, STREAMS, read);
  compactor.child.kill('SIGTERM');
  await new Promise((resolve) => compactor.child.once('exit', resolve));
  const goal = burstStreams.rss / 1e6 <= 150 ? 'yes' : 'no';
  return `| ${burst} (${(body.length / 1024).toFixed(0)} KiB) | ${variant.label} | ${mib(fresh.rss)} | ${mib(freshStreams.rss)} | ${mib(afterBurst.rss)} | **${mib(burstStreams.rss)}** (${(burstStreams.rss / 1e6).toFixed(0)} MB, ${goal}) | ${heap(burstStreams)} | ${mib(burstStreams.newSpace)} / ${mib(burstStreams.rss - burstStreams.heapTotal)} | ${mib(restedStreams.rss)} | ${result.total} | ${cpu.toFixed(0)} |`;
}

const heap = (value: Reading): string => `${mib(value.heapUsed)} / ${mib(value.heapTotal)} / ${mib(value.external)}`;
// After the burst, the streams again once V8's memory reducer has had time to run (it waits for a quiet process).
const REST_MS = Number(option('rest-seconds', '30')) * 1000;

buildRevision(process.cwd(), null);
const upstream = await startUpstream();
const rows: string[] = [];
for (const burst of bursts) {
  for (const variant of variants) {
    rows.push(await measure(burst, variant));
    console.error(rows.at(-1));
  }
}
const load1 = readFileSync('/proc/loadavg', 'utf8').split(' ')[0];
const work = saturate ? `${SECONDS} s each` : bursts.map((burst) => `${AMOUNTS[burst]} requests of ${burst}`).join(', ');
console.log(`Idle streams, Node ${process.version}, ${new Date().toISOString()}, load average ${load1}; ${STREAMS} idle streams of ${idleBodyName} bodies; bursts at c=32 (${work}):`);
console.log('');
console.log(`| burst body | compactor run | RSS MiB fresh | with ${STREAMS} idle streams | right after the burst | idle streams after the burst (goal ≤ 150 MB) | its heap used / total / external MiB | its new space / RSS outside the heap MiB | idle streams again ${REST_MS / 1000} s later | burst requests | burst CPU µs/req |`);
console.log('|---|---|---|---|---|---|---|---|---|---|---|');
for (const row of rows) console.log(row);
process.exit(0);
