/**
 * CPU per request of several revisions at once (issue 40): to find which
 * change made a request dearer, and by how much, in one run. Each revision
 * is compiled as side-by-side.ts compiles it (build-revision.ts), all are
 * started on the proxy core, warmed with `--warm` requests each (V8 still
 * compiles compactor's hot code for ~8,000 requests), then loaded one at a
 * time at a fixed rate, in a rotating order each round, so every revision
 * meets the machine's moments in turn. Each is run by its own
 * bench/servers/compactor.ts (revisions before 089a058 also run that
 * file's 1 ms stall probe, ~4% of a 2 KB request).
 *
 *   npx tsx bench/revisions.ts --revisions=f88fe3e,74dfeb7,HEAD            (2 KB chat, not triggered)
 *   npx tsx bench/revisions.ts --revisions=a,b --body=36k --config='{"compaction":{"enabled":true,"max_messages":8},"log":{"level":"info"}}'
 *   npx tsx bench/revisions.ts --revisions=HEAD,. --rounds=6               (`.` is the working tree)
 */
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { cpuMicros, startPinned } from './bench-process.js';
import { buildRevision } from './build-revision.js';
import { agentBody, chatBody, runLoad, sendRequests } from './load-client.js';

const option = (name: string, fallback: string): string =>
  process.argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const revisions = option('revisions', 'HEAD,.').split(',');
const rate = Number(option('rate', '1000'));
const rounds = Number(option('rounds', '5'));
const seconds = Number(option('seconds', '4'));
const warm = Number(option('warm', '10000'));
const config = option('config', '{"compaction":{"enabled":true},"log":{"level":"info"}}');
const bodyName = option('body', '2k');
const body = bodyName === '200k' ? agentBody('bench', false, 200_000) : bodyName === '36k' ? agentBody('bench', false, 36_000) : chatBody('bench', false);
const headers = { 'content-type': 'application/json', authorization: 'Bearer sk-bench' };

const ROOT = resolve(import.meta.dirname, '..');
const LOAD_CPU = '0';
const PROXY_CPU = '1';
const children: ChildProcess[] = [];
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

const current = buildRevision(ROOT, null);
const builds = revisions.map((revision) => (revision === '.' ? current : buildRevision(ROOT, revision)));
const upstream = await startPinned(children, LOAD_CPU, join(current, 'bench/servers/upstream.js'), ['0'], [], bodyName === '2k' ? {} : { N_CTX: '262144' });
const sides: { name: string; child: ChildProcess; origin: string }[] = [];
for (const [index, build] of builds.entries()) sides.push({ name: revisions[index] === '.' ? 'working tree' : revisions[index]!, ...(await startPinned(children, PROXY_CPU, join(build, 'bench/servers/compactor.js'), [upstream.origin, config])) });
for (const side of sides) await sendRequests(side.origin, warm, 8, headers, body);
await sleep(1000);

console.log(`CPU µs per request on CPU ${PROXY_CPU}, ${bodyName === '2k' ? '2 KB chat' : `${bodyName.replace('k', ' KB')} agent`} body, ${rate} req/s offered, c=32, ${rounds} rounds of ${seconds} s after ${warm} requests each, config ${config}, Node ${process.version}, load average ${readFileSync('/proc/loadavg', 'utf8').split(' ')[0]}:`);
console.log('');
console.log(`| round | ${sides.map((side) => side.name).join(' | ')} |`);
console.log(`|---|${sides.map(() => '---|').join('')}`);
const perSide: number[][] = sides.map(() => []);
for (let round = 0; round < rounds; round++) {
  const row: number[] = [];
  for (let step = 0; step < sides.length; step++) {
    const index = (round + step) % sides.length;
    const side = sides[index]!;
    const before = cpuMicros(side.child.pid!);
    const result = await runLoad(current, { url: `${side.origin}/v1/chat/completions`, seconds, connections: 32, rate, headers, body }, LOAD_CPU);
    await sleep(300);
    if (result.non2xx > 0 || result.errors > 0) throw new Error(`${side.name}: ${result.non2xx} non-2xx, ${result.errors} errors`);
    row[index] = (cpuMicros(side.child.pid!) - before) / result.total;
  }
  for (const [index, micros] of row.entries()) perSide[index]!.push(micros);
  console.log(`| ${round + 1} | ${row.map((micros) => micros.toFixed(1)).join(' | ')} |`);
}
const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length % 2 === 1 ? sorted[(sorted.length - 1) / 2]! : (sorted[sorted.length / 2 - 1]! + sorted[sorted.length / 2]!) / 2;
};
const medians = perSide.map(median);
console.log(`| median | ${medians.map((value) => value.toFixed(1)).join(' | ')} |`);
console.log(`| × ${sides[0]!.name} | ${medians.map((value) => (value / medians[0]!).toFixed(3)).join(' | ')} |`);
for (const child of children) child.kill('SIGTERM');
process.exit(0);
