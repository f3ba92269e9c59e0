/**
 * Syscalls per request (issue 40): each proxy of own-cost.ts under `strace -c -f`, counted over
 * `--requests` after `--warm`, at c=`--connections`. A count, not a time: the machine's load does not move it.
 *
 *   npx tsx bench/syscalls.ts --body=2k --requests=2000 --warm=2000 --connections=32
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { agentBody, chatBody, sendRequests } from './load-client.js';

const option = (name: string, fallback: string): string => process.argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const bodyName = option('body', '2k');
const requests = Number(option('requests', '2000'));
const warm = Number(option('warm', '2000'));
const connections = Number(option('connections', '32'));
const build = option('build', `node_modules/.cache/compactor-bench-${basename(process.cwd())}`);
const variantNames = option('variants', 'fastify,not-triggered').split(',');
const body = bodyName === '2k' ? chatBody('bench', false) : agentBody('bench', false, bodyName === '36k' ? 36_000 : 200_000);
const headers = { 'content-type': 'application/json', authorization: 'Bearer sk-bench' };

const children: ChildProcess[] = [];
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});
async function start(script: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ child: ChildProcess; origin: string }> {
  const child = spawn(process.execPath, [`${build}/${script}`, ...args], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], env: { ...process.env, ...env } });
  children.push(child);
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${script} exited (${code}) before listening`)));
    child.on('message', (message: { port?: number }) => {
      if (typeof message.port === 'number') resolve(message.port);
    });
  });
  return { child, origin: `http://127.0.0.1:${port}` };
}

if (!option('build', '')) execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'bench/servers/tsconfig.json', '--outDir', build], { stdio: 'inherit' });
const upstream = await start('bench/servers/upstream.js', ['0'], { N_CTX: '262144' });
const VARIANTS: Record<string, () => [string, string[]]> = {
  fastify: () => ['bench/servers/fastify-proxy.js', [upstream.origin]],
  bare: () => ['bench/servers/bare-proxy.js', [upstream.origin]],
  'not-triggered': () => ['bench/servers/compactor.js', [upstream.origin, JSON.stringify({ compaction: { enabled: true }, log: { level: 'info' } })]],
  'cached-epoch': () => ['bench/servers/compactor.js', [upstream.origin, JSON.stringify({ compaction: { enabled: true, max_messages: 8 }, log: { level: 'info' } })]],
};
console.log(`| variant | syscalls per request | top calls per request |`);
console.log(`|---|---|---|`);
for (const name of variantNames) {
  const [script, args] = VARIANTS[name]!();
  const proxy = await start(script, args);
  await sendRequests(proxy.origin, warm, connections, headers, body);
  const out = join(mkdtempSync(join(tmpdir(), 'compactor-strace-')), 'strace.txt');
  const strace = spawn('strace', ['-c', '-f', '-o', out, '-p', String(proxy.child.pid)], { stdio: 'ignore' });
  await sleep(1000);
  await sendRequests(proxy.origin, requests, connections, headers, body);
  strace.kill('SIGINT');
  await new Promise((resolve) => strace.once('exit', resolve));
  const rows = readFileSync(out, 'utf8').split('\n').map((line) => line.trim().split(/\s+/)).filter((fields) => fields.length >= 5 && /^\d/.test(fields[0]!) && fields.at(-1) !== 'total');
  const calls = rows.map((fields) => ({ name: fields.at(-1)!, calls: Number(fields[3]), micros: Number(fields[2]) })).sort((a, b) => b.calls - a.calls);
  const total = calls.reduce((sum, row) => sum + row.calls, 0);
  console.log(`| ${name} | ${(total / requests).toFixed(2)} | ${calls.slice(0, 8).map((row) => `${row.name} ${(row.calls / requests).toFixed(2)} (${row.micros} µs)`).join(', ')} |`);
  proxy.child.kill('SIGTERM');
}
process.exit(0);
