/**
 * Where compactor's RSS goes with 1,000 idle streams, before and after a
 * burst (issue 40): a diagnostic beside bench/idle-streams.ts, which grades.
 * compactor's compiled main runs as in idle-streams.ts, in front of
 * bench/servers/upstream.ts, with one module loaded by `--import` that writes
 * V8's heap spaces on SIGWINCH. At each moment: RSS split by mapping
 * (`/proc/PID/smaps`: the node binary and libraries, glibc's main arena
 * `[heap]`, anonymous mappings, which hold V8's pages and the other arenas),
 * V8's spaces (committed / used), and what lies outside V8's heap.
 *
 *   npx tsx bench/rss-breakdown.ts                     (a 2 KB burst; --burst=200k for 200 KB bodies)
 *   npx tsx bench/rss-breakdown.ts --trim              (also after malloc_trim(0), called through gdb: what glibc holds free)
 *   npx tsx bench/rss-breakdown.ts --build=node_modules/.cache/compactor-REV --flags="--max-semi-space-size=8" --env="MALLOC_ARENA_MAX=2"
 *
 * `--build` takes a build bench/side-by-side.ts or idle-streams.ts `--base` left; the working tree's by default
 * (compiled by those benches: run one of them first).
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { holdIdleStreams } from './idle-stream-pool.js';
import { agentBody, chatBody, runLoad } from './load-client.js';

const option = (name: string, fallback: string): string => process.argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const BUILD = option('build', `node_modules/.cache/compactor-bench-${basename(process.cwd())}`);
const burst = option('burst', '2k');
const flags = option('flags', '').split(' ').filter((word) => word !== '');
const variantEnv = Object.fromEntries(option('env', '').split(' ').filter((word) => word !== '').map((word) => [word.slice(0, word.indexOf('=')), word.slice(word.indexOf('=') + 1)]));
const trim = process.argv.includes('--trim');
const REST_MS = Number(option('rest-seconds', '20')) * 1000;
const headers = { 'content-type': 'application/json', authorization: 'Bearer sk-bench' };
const CHAT = '/v1/chat/completions';
const MiB = 1024 * 1024;

const children: ChildProcess[] = [];
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

// The probe: V8's spaces and the process's memory, written where PROBE_OUT says on SIGWINCH (ignored by default, unused by compactor).
const workDir = mkdtempSync(join(tmpdir(), 'compactor-rss-'));
const probe = join(workDir, 'probe.mjs');
const probeOut = join(workDir, 'probe.json');
writeFileSync(
  probe,
  `import { getHeapSpaceStatistics, getHeapStatistics } from 'node:v8';
import { writeFileSync } from 'node:fs';
process.on('SIGWINCH', () => {
  const spaces = Object.fromEntries(getHeapSpaceStatistics().map((s) => [s.space_name, { used: s.space_used_size, physical: s.physical_space_size }]));
  writeFileSync(process.env.PROBE_OUT, JSON.stringify({ spaces, physical: getHeapStatistics().total_physical_size, mem: process.memoryUsage() }));
});
`,
);

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const address = server.address() as { port: number };
  await new Promise<void>((done) => server.close(() => done()));
  return address.port;
}

const upstream = spawn(process.execPath, [`${BUILD}/bench/servers/upstream.js`, '0'], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], env: { ...process.env, N_CTX: '262144', STALL_CHUNK_MS: '2000' } });
children.push(upstream);
const upstreamPort = await new Promise<number>((done) =>
  upstream.on('message', (message: { port?: number }) => {
    if (typeof message.port === 'number') done(message.port);
  }),
);
const port = await freePort();
const env = { ...process.env, NODE_ENV: 'production', COMPACTOR_HOST: '127.0.0.1', COMPACTOR_PORT: String(port), COMPACTOR_UPSTREAM_URL: `http://127.0.0.1:${upstreamPort}`, PROBE_OUT: probeOut, ...variantEnv };
const compactor = spawn(process.execPath, [`--import=${probe}`, ...flags, resolve(BUILD, 'src/main.js')], { stdio: ['ignore', 'ignore', 'inherit'], env });
children.push(compactor);
const origin = `http://127.0.0.1:${port}`;
for (;;) {
  try {
    const response = await fetch(`${origin}/healthz`);
    await response.arrayBuffer();
    if (response.ok) break;
  } catch {
    // not listening yet
  }
  await sleep(50);
}
const pid = compactor.pid!;

/** Resident bytes by kind of mapping. */
function mappings(): { file: number; arena: number; anonymous: number } {
  const total = { file: 0, arena: 0, anonymous: 0 };
  let kind: keyof typeof total | null = null;
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head !== null) {
      const path = head[1]!;
      kind = path === '' ? 'anonymous' : path === '[heap]' ? 'arena' : path.startsWith('/') ? 'file' : null;
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss !== null && kind !== null) total[kind] += Number(rss[1]) * 1024;
  }
  return total;
}

interface Probe {
  readonly spaces: Record<string, { used: number; physical: number }>;
  readonly physical: number;
  readonly mem: { external: number; arrayBuffers: number };
}

const rows: string[] = [];
async function read(label: string): Promise<void> {
  if (existsSync(probeOut)) unlinkSync(probeOut);
  const rss = Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;
  const mapped = mappings();
  process.kill(pid, 'SIGWINCH');
  while (!existsSync(probeOut)) await sleep(20);
  await sleep(20);
  const probed = JSON.parse(readFileSync(probeOut, 'utf8')) as Probe;
  const mib = (bytes: number): string => (bytes / MiB).toFixed(0);
  const space = (name: string): string => `${mib(probed.spaces[name]!.physical)} / ${mib(probed.spaces[name]!.used)}`;
  const outside = mapped.anonymous + mapped.arena - probed.physical;
  rows.push(
    `| ${label} | ${mib(rss)} | ${mib(mapped.file)} | ${mib(probed.physical)} | ${space('new_space')} | ${space('old_space')} | ${mib(outside)} | ${mib(mapped.arena)} | ${mib(probed.mem.arrayBuffers)} |`,
  );
  console.error(rows.at(-1));
}

/** 1,000 idle streams: read once their first chunks went through (and again after malloc_trim with `--trim`). */
async function withIdleStreams(label: string): Promise<void> {
  const streams = await holdIdleStreams(origin, 1000, { path: CHAT, headers, body: chatBody('bench-stall', true) });
  await sleep(4500);
  await read(label);
  if (trim) {
    execFileSync('gdb', ['-p', String(pid), '-batch', '-ex', 'call (int)malloc_trim(0)'], { stdio: 'ignore' });
    await sleep(200);
    await read(`${label}, after malloc_trim(0)`);
  }
  await streams.release();
  await sleep(1000);
}

await read('fresh');
await withIdleStreams('1,000 idle streams');
const body = burst === '2k' ? chatBody('bench', false) : agentBody('bench', false, 200_000);
const result = await runLoad(BUILD, { url: `${origin}${CHAT}`, seconds: 6, connections: 32, headers, body, amount: burst === '2k' ? 30_000 : 3_000 }, null);
if (result.non2xx > 0 || result.errors > 0) throw new Error(`burst: ${result.non2xx} non-2xx, ${result.errors} errors`);
await read(`right after ${result.total} × ${burst}`);
await sleep(2000);
await withIdleStreams('1,000 idle streams after the burst');
await sleep(REST_MS);
await withIdleStreams(`again ${REST_MS / 1000} s later`);
console.log(`RSS by kind, ${BUILD} ${flags.join(' ')} ${option('env', '')}, ${new Date().toISOString()}, load average ${readFileSync('/proc/loadavg', 'utf8').split(' ')[0]}, MiB:`);
console.log('');
console.log('| moment | RSS | files (node binary, libraries) | V8 heap committed | new space committed / used | old space committed / used | outside V8 (malloc, stacks) | of it glibc main arena | ArrayBuffers |');
console.log('|---|---|---|---|---|---|---|---|---|');
for (const row of rows) console.log(row);
process.exit(0);
