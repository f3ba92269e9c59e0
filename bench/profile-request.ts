/**
 * Where one kind of request spends its CPU (issue 40): compactor (or the
 * minimal Fastify proxy) built as own-cost.ts builds it, run with
 * `--cpu-prof` (and `--trace-gc` with `--gc`) under a load of this script's
 * choosing, then the profile's top functions by self time as a share of all
 * samples, so the ranking holds on a machine loaded by others (the absolute
 * times do not).
 *
 *   npx tsx bench/profile-request.ts --body=2k --variant=not-triggered --connections=32 --seconds=10
 *   npx tsx bench/profile-request.ts --body=36k --variant=cached-epoch --connections=1 --gc
 *   npx tsx bench/profile-request.ts --body=200k --variant=fastify --top=30
 *
 * `--body`: 2k (performance.ts's chat body, 14 messages), 36k or 200k (own-cost.ts's agent bodies).
 * `--variant`: not-triggered, cached-epoch (`max_messages` 8: the first request summarizes, every later one
 * reuses its epoch) or fastify (bench/servers/fastify-proxy.ts). `--rate`: requests per second offered
 * (as many as answered when absent). Processes pinned as own-cost.ts pins them (load and upstream on CPU 0,
 * the proxy on CPU 1). The profile stays in `--out` (default a temporary folder) for DevTools.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { agentBody, chatBody, runLoad } from './load-client.js';

const option = (name: string, fallback: string): string => process.argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const bodyName = option('body', '2k');
const variant = option('variant', 'not-triggered');
const connections = Number(option('connections', '32'));
const seconds = Number(option('seconds', '10'));
const rate = option('rate', '');
const top = Number(option('top', '25'));
const traceGc = process.argv.includes('--gc');
const out = option('out', mkdtempSync(join(tmpdir(), 'compactor-profile-')));
const warmSeconds = Number(option('warm-seconds', '2'));
// `--build=DIR`: a build another bench left (side-by-side.ts's node_modules/.cache/compactor-REV), profiled as it is.
const given = option('build', '');
const BUILD = given === '' ? `node_modules/.cache/compactor-bench-${basename(process.cwd())}` : given;

const BODIES: Record<string, () => string> = {
  '2k': () => chatBody('bench', false),
  '36k': () => agentBody('bench', false, 36_000),
  '200k': () => agentBody('bench', false, 200_000),
};
const body = (BODIES[bodyName] ?? ((): never => { throw new Error(`unknown body ${bodyName}`); }))();
const CONFIGS: Record<string, object | null> = {
  'not-triggered': { compaction: { enabled: true } },
  'cached-epoch': { compaction: { enabled: true, max_messages: 8 } },
  fastify: null,
};
if (!(variant in CONFIGS)) throw new Error(`unknown variant ${variant}`);

const children: ChildProcess[] = [];
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

async function start(cpu: string, args: string[], env: NodeJS.ProcessEnv = {}, stdout?: (text: string) => void): Promise<{ child: ChildProcess; origin: string }> {
  const child = spawn('taskset', ['-c', cpu, process.execPath, ...args], { stdio: ['ignore', stdout === undefined ? 'ignore' : 'pipe', 'inherit', 'ipc'], env: { ...process.env, ...env } });
  children.push(child);
  if (stdout !== undefined) child.stdout!.setEncoding('utf8').on('data', stdout);
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${args.at(-2) ?? args[0]} exited (${code}) before listening`)));
    child.on('message', (message: { port?: number }) => {
      if (typeof message.port === 'number') resolve(message.port);
    });
  });
  return { child, origin: `http://127.0.0.1:${port}` };
}

if (given === '') execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'bench/servers/tsconfig.json', '--outDir', BUILD], { stdio: 'inherit' });
const upstream = await start('0', [`${BUILD}/bench/servers/upstream.js`, '0'], { N_CTX: bodyName === '2k' ? '32768' : '262144' });
let gcLines = '';
const flags = ['--cpu-prof', `--cpu-prof-dir=${out}`, ...(traceGc ? ['--trace-gc'] : [])];
const config = CONFIGS[variant];
const proxy =
  config === null
    ? await start('1', [...flags, `${BUILD}/bench/servers/fastify-proxy.js`, upstream.origin], {}, (text) => (gcLines += text))
    : await start('1', [...flags, `${BUILD}/bench/servers/compactor.js`, upstream.origin, JSON.stringify({ ...config, log: { level: 'info' } })], {}, (text) => (gcLines += text));

const headers = { 'content-type': 'application/json', authorization: 'Bearer sk-bench' };
const url = `${proxy.origin}/v1/chat/completions`;
// Warm: the cached-epoch variant's first request makes its epoch; the JIT settles.
await runLoad(BUILD, { url, seconds: warmSeconds, connections, headers, body }, '0');
gcLines = '';
// The profile's sample times and process.hrtime read one monotonic clock: only the samples of the measured load count,
// not the start's module loading nor the warm-up's compiling.
const measuredFrom = process.hrtime.bigint() / 1000n;
const result = await runLoad(BUILD, { url, seconds, connections, headers, body, ...(rate === '' ? {} : { rate: Number(rate) }) }, '0');
const measuredTo = process.hrtime.bigint() / 1000n;
if (result.non2xx > 0 || result.errors > 0) throw new Error(`${result.non2xx} non-2xx, ${result.errors} errors`);
const exited = new Promise((resolve) => proxy.child.once('exit', resolve));
proxy.child.kill('SIGTERM');
await exited;

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
const file = readdirSync(out).find((name) => name.endsWith('.cpuprofile'))!;
const profile = JSON.parse(readFileSync(join(out, file), 'utf8')) as { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[]; startTime: number };
const selfMicros = new Map<number, number>();
let sampledAt = profile.startTime;
for (const [index, id] of profile.samples.entries()) {
  const delta = profile.timeDeltas[index] ?? 0;
  sampledAt += delta;
  if (sampledAt >= measuredFrom && sampledAt <= measuredTo) selfMicros.set(id, (selfMicros.get(id) ?? 0) + delta);
}
const byFunction = new Map<string, number>();
// `--by=file`: self time summed by source file (node's internals by module), to compare two builds' rooms.
const byFile = process.argv.includes('--by=file');
let all = 0;
let idle = 0;
for (const node of profile.nodes) {
  const micros = selfMicros.get(node.id) ?? 0;
  all += micros;
  const { functionName, url: where, lineNumber } = node.callFrame;
  if (functionName === '(idle)') idle += micros;
  const place = where === '' ? '' : ` ${where.replace(/^file:\/\/.*?\/(node_modules\/\.cache\/[^/]+\/)?/, '').replace(/^node:/, 'node:')}:${lineNumber + 1}`;
  const name = byFile ? (where === '' ? functionName || '(anonymous)' : place.trim().replace(/:\d+$/, '')) : `${functionName || '(anonymous)'}${place}`;
  byFunction.set(name, (byFunction.get(name) ?? 0) + micros);
}
const busy = all - idle;
console.log(`${variant}, ${bodyName} body, c=${connections}${rate === '' ? '' : `, ${rate} req/s`}, ${seconds} s: ${result.total} requests (${result.average.toFixed(0)} req/s); profile ${join(out, file)}`);
console.log(`load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}; busy ${((100 * busy) / all).toFixed(1)}% of samples, ${(busy / result.total).toFixed(0)} µs of sampled CPU per request (main thread)`);
console.log('');
console.log('| share of busy samples | self µs/req | function |');
console.log('|---|---|---|');
for (const [name, micros] of [...byFunction].filter(([name]) => !name.startsWith('(idle)')).sort((a, b) => b[1] - a[1]).slice(0, top)) {
  console.log(`| ${((100 * micros) / busy).toFixed(1)}% | ${(micros / result.total).toFixed(1)} | ${name.replaceAll('|', '\\|')} |`);
}
if (traceGc) {
  const lines = gcLines.split('\n');
  const sum = (kind: RegExp): { count: number; ms: number } => {
    let count = 0;
    let ms = 0;
    for (const line of lines) {
      if (!kind.test(line)) continue;
      count++;
      ms += Number(/, ([\d.]+) \/ [\d.]+ ms/.exec(line)?.[1] ?? 0);
    }
    return { count, ms };
  };
  const scavenges = sum(/Scavenge/);
  const marks = sum(/Mark-Compact|Mark-sweep/i);
  console.log('');
  console.log(`--trace-gc over the measured load: ${scavenges.count} scavenges, ${scavenges.ms.toFixed(0)} ms (${((1000 * scavenges.ms) / result.total).toFixed(1)} µs/req); ${marks.count} mark-compacts, ${marks.ms.toFixed(0)} ms`);
}
for (const child of children) child.kill('SIGTERM');
process.exit(0);
