/**
 * Asynchronous resources per request (issue 40): promises, ticks, immediates, timers and the rest that
 * async_hooks sees created, counted in the proxy for `--requests` requests after `--warm`. A count no load
 * moves, exact to the resource where instructions.ts's counts move by a few percent from run to run: an
 * `await` saved or an `async` function made synchronous shows here as the promises it no longer makes.
 *
 *   npx tsx bench/async-resources.ts --builds=node_modules/.cache/compactor-a,node_modules/.cache/compactor-b
 *
 * `--builds`: compiled trees (as instructions.ts's `--build`), each run in turn; the 2 KB chat body, not
 * triggered (`compaction.enabled`, the defaults otherwise), c=`--connections`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chatBody, sendRequests } from './load-client.js';

const option = (name: string, fallback: string): string => process.argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const builds = option('builds', '').split(',').filter((build) => build !== '');
const requests = Number(option('requests', '1000'));
const warm = Number(option('warm', '2000'));
const connections = Number(option('connections', '4'));
const body = chatBody('bench', false);
const headers = { 'content-type': 'application/json', authorization: 'Bearer sk-bench' };

const children: ChildProcess[] = [];
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

function start(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ child: ChildProcess; origin: string }> {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], env: { ...process.env, ...env } });
  children.push(child);
  return new Promise((resolve) => child.on('message', (message: { port?: number }) => typeof message.port === 'number' && resolve({ child, origin: `http://127.0.0.1:${message.port}` })));
}

function ask<T>(child: ChildProcess, message: object, key: string): Promise<T> {
  return new Promise((resolve) => {
    const listener = (answer: Record<string, unknown>): void => {
      if (!(key in answer)) return;
      child.off('message', listener);
      resolve(answer[key] as T);
    };
    child.on('message', listener);
    child.send(message);
  });
}

const send = (origin: string, count: number): Promise<void> => sendRequests(origin, count, connections, headers, body);

console.log(`Asynchronous resources per request (async_hooks), 2 KB chat not triggered, ${requests} requests at c=${connections} after ${warm}, Node ${process.version}:`);
console.log('');
const rows: Array<[string, Record<string, number>]> = [];
for (const build of builds) {
  const upstream = await start([`${build}/bench/servers/upstream.js`, '0'], { N_CTX: '32768' });
  const proxy = await start(['--import', new URL('./servers/async-counts.mjs', import.meta.url).pathname, `${build}/bench/servers/compactor.js`, upstream.origin, JSON.stringify({ compaction: { enabled: true }, log: { level: 'info' } })]);
  await send(proxy.origin, warm);
  await ask(proxy.child, { asyncCounts: 'reset' }, 'asyncCounts');
  await send(proxy.origin, requests);
  rows.push([build, await ask<Record<string, number>>(proxy.child, { asyncCounts: 'read' }, 'asyncCounts')]);
  proxy.child.kill('SIGKILL');
  upstream.child.kill('SIGKILL');
}
const types = [...new Set(rows.flatMap(([, counts]) => Object.keys(counts)))].sort();
console.log(`| build | all | ${types.join(' | ')} |`);
console.log(`|---|---|${types.map(() => '---|').join('')}`);
for (const [build, counts] of rows) {
  const all = Object.values(counts).reduce((sum, count) => sum + count, 0);
  console.log(`| ${build} | ${(all / requests).toFixed(2)} | ${types.map((type) => ((counts[type] ?? 0) / requests).toFixed(2)).join(' | ')} |`);
}
process.exit(0);
