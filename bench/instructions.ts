/**
 * Instructions per request, counted by valgrind's callgrind (issue 40): a
 * figure the other engineers' load does not move, unlike CPU time. The proxy
 * runs under callgrind (every thread: the main one and V8's GC workers),
 * answers `--warm` requests, has its counters zeroed (callgrind_control -z),
 * answers `--requests` more (c=`--connections`, from this script), and the
 * dump's total divided by them is its cost per request.
 *
 *   npx tsx bench/instructions.ts --body=2k --variants=fastify,not-triggered
 *   npx tsx bench/instructions.ts --body=36k --variants=cached-epoch --build=node_modules/.cache/compactor-abc1234
 *
 * `--build`: a compiled tree (side-by-side.ts leaves one per revision in node_modules/.cache/; default this
 * working tree's, compiled here). Variants: fastify (bench/servers/fastify-proxy.ts), not-triggered,
 * cached-epoch (`max_messages` 8). Bodies as profile-request.ts's. Slow (~50× under valgrind): a few
 * hundred requests give a stable figure, after a warm-up long enough for V8 to have optimized what the
 * requests run: 8,000 by default (~10 minutes a variant for the 2 KB body), where natively its compiling
 * has settled; the third column says how much of the count its compiler still took.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { Pool } from 'undici';
import { agentBody, chatBody } from './load-client.js';

const option = (name: string, fallback: string): string => process.argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const bodyName = option('body', '2k');
const variants = option('variants', 'fastify,not-triggered,cached-epoch').split(',');
const requests = Number(option('requests', '300'));
const warm = Number(option('warm', '8000'));
const connections = Number(option('connections', '4'));
const ownBuild = `node_modules/.cache/compactor-bench-${basename(process.cwd())}`;
const build = option('build', ownBuild);

const body = bodyName === '2k' ? chatBody('bench', false) : agentBody('bench', false, bodyName === '36k' ? 36_000 : 200_000);
const CONFIGS: Record<string, object | null> = {
  'not-triggered': { compaction: { enabled: true } },
  'cached-epoch': { compaction: { enabled: true, max_messages: 8 } },
  fastify: null,
};

const children: ChildProcess[] = [];
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

async function start(command: string[], env: NodeJS.ProcessEnv = {}): Promise<{ child: ChildProcess; origin: string }> {
  const child = spawn(command[0]!, command.slice(1), { stdio: ['ignore', 'ignore', 'ignore', 'ipc'], env: { ...process.env, ...env } });
  children.push(child);
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${command.join(' ').slice(0, 200)} exited (${code}) before listening`)));
    child.on('message', (message: { port?: number }) => {
      if (typeof message.port === 'number') resolve(message.port);
    });
  });
  return { child, origin: `http://127.0.0.1:${port}` };
}

const headers = { 'content-type': 'application/json', authorization: 'Bearer sk-bench' };

/**
 * Instructions V8's optimizing compiler (TurboFan, on its own thread) spent in a dump: still ~40% of the
 * count after 1,500 requests of warm-up under callgrind, where natively it settles after some 8,000
 * (`--trace-opt`); a steady state spends next to none, so the count without it is shown beside the total.
 */
function compilerShare(dump: string): number {
  const text = execFileSync('callgrind_annotate', ['--inclusive=yes', '--threshold=100', dump], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  const line = text.split('\n').find((each) => each.includes('OptimizingCompileDispatcher::CompileTask::RunInternal'));
  return Number(line?.trim().split(/\s+/)[0]?.replace(/,/g, '') ?? 0);
}

async function send(origin: string, count: number): Promise<void> {
  const pool = new Pool(origin, { connections });
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next++ < count) {
      const response = await pool.request({ method: 'POST', path: '/v1/chat/completions', headers, body });
      await response.body.arrayBuffer();
      if (response.statusCode !== 200) throw new Error(`status ${response.statusCode}`);
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
  await pool.close();
}

if (build === ownBuild) execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'bench/servers/tsconfig.json', '--outDir', ownBuild], { stdio: 'inherit' });
const upstream = await start([process.execPath, `${build}/bench/servers/upstream.js`, '0'], { N_CTX: bodyName === '2k' ? '32768' : '262144' });
console.log(`Instructions per request (callgrind, all threads), ${bodyName} body, ${requests} requests at c=${connections} after ${warm} to warm up, build ${build}, Node ${process.version}:`);
console.log('');
console.log('| variant | instructions / request | without the optimizing compiler | the compiler\'s share |');
console.log('|---|---|---|---|');
for (const variant of variants) {
  const config = CONFIGS[variant];
  if (config === undefined) throw new Error(`unknown variant ${variant}`);
  const out = mkdtempSync(join(tmpdir(), 'compactor-callgrind-'));
  const script = config === null ? [`${build}/bench/servers/fastify-proxy.js`, upstream.origin] : [`${build}/bench/servers/compactor.js`, upstream.origin, JSON.stringify({ ...config, log: { level: 'info' } })];
  const proxy = await start(['valgrind', '--tool=callgrind', '--smc-check=all-non-file', `--callgrind-out-file=${out}/callgrind.out.%p`, process.execPath, ...script]);
  await send(proxy.origin, warm);
  execFileSync('callgrind_control', ['-z', String(proxy.child.pid)], { stdio: 'ignore' });
  await send(proxy.origin, requests);
  execFileSync('callgrind_control', ['-d', String(proxy.child.pid)], { stdio: 'ignore' });
  let total = 0;
  let compiling = 0;
  for (const name of readdirSync(out)) {
    // The dump after the zeroing (".1"): its totals are the measured requests' work.
    if (!name.endsWith('.1')) continue;
    const text = readFileSync(join(out, name), 'utf8');
    total += Number(/^(?:summary|totals): (\d+)/m.exec(text)?.[1] ?? 0);
    compiling += compilerShare(join(out, name));
  }
  if (total === 0) throw new Error(`no callgrind dump in ${out}: ${readdirSync(out).join(', ')}`);
  console.log(`| ${variant} | ${Math.round(total / requests).toLocaleString('en-US')} | ${Math.round((total - compiling) / requests).toLocaleString('en-US')} | ${((100 * compiling) / total).toFixed(1)}% |`);
  proxy.child.kill('SIGKILL');
}
for (const child of children) child.kill('SIGTERM');
process.exit(0);
