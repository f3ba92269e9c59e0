/**
 * CPU per request of two builds of compactor, side by side: both run at once
 * on the proxy core, each offered the same fixed load, and each one's CPU
 * time (user + system, from /proc) is divided by the requests it answered.
 * Both see the same noise at the same moment, so their ratio holds still on
 * a machine whose throughput runs wander by ±10% (bench/README.md).
 *
 *   npx tsx bench/side-by-side.ts --base=3f8ec83             (that commit against the working tree)
 *   npx tsx bench/side-by-side.ts --base=HEAD~1 --rate=3000 --rounds=4 --seconds=5
 *   npx tsx bench/side-by-side.ts --base=HEAD --config='{"compaction":{"max_messages":8}}'
 *   npx tsx bench/side-by-side.ts --base=HEAD --config-b='{"dashboard":{"enabled":false}}'   (one build, two configurations)
 *   npx tsx bench/side-by-side.ts --base=HEAD --node-flags-b="--max-semi-space-size=2"     (the working tree run with Node flags)
 *   npx tsx bench/side-by-side.ts --base=HEAD --env-b="MALLOC_MMAP_THRESHOLD_=131072"       (the working tree run with variables set)
 *
 * A git revision is checked out in a temporary worktree and compiled beside
 * the working tree's build (node_modules/.cache/compactor-REV). The request
 * is performance.ts's 2 KB chat body, or with `--body=36k` / `--body=200k` own-cost.ts's 36 KB / 200 KB
 * agent body (the upstream then serves a 262,144-token window, so it stays under the soft threshold;
 * `--config='{"compaction":{"max_messages":8}}'` gives it a cached epoch); the upstream
 * is bench/servers/upstream.ts. `--swap` starts and lists the working tree first (the ratio is
 * still working tree / base): run a change in both orders.
 */
import type { ChildProcess } from 'node:child_process';
import { cpuMicros, startPinned } from './bench-process.js';
import { buildRevision } from './build-revision.js';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { agentBody, chatBody, type LoadResult, runLoad } from './load-client.js';

const option = (name: string, fallback: string): string =>
  process.argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const base = option('base', 'HEAD');
const rate = Number(option('rate', '3000'));
const rounds = Number(option('rounds', '4'));
const seconds = Number(option('seconds', '5'));
const config = option('config', '{"compaction":{"enabled":true},"log":{"level":"info"}}');
const bodyName = option('body', '2k');
const agentSized = bodyName !== '2k';
const body = bodyName === '200k' ? agentBody('bench', false, 200_000) : bodyName === '36k' ? agentBody('bench', false, 36_000) : chatBody('bench', false);
// Started, loaded and listed first: the working tree (`--swap`) or the base. The second process reads dearer on this
// machine whatever it runs (bench/README.md), so a change is read in both orders.
const swap = process.argv.includes('--swap');
// The working tree's configuration, when it differs from the base's: a setting measured against the same code without it.
const configB = option('config-b', config);
const nodeFlagsB = option('node-flags-b', '').split(' ').filter((flag) => flag !== '');
// Variables the working tree's process starts with (`--env-b="MALLOC_MMAP_THRESHOLD_=131072"`): what must be set before node starts.
const envB = Object.fromEntries(option('env-b', '').split(' ').filter((word) => word !== '').map((word) => [word.slice(0, word.indexOf('=')), word.slice(word.indexOf('=') + 1)]));

const ROOT = resolve(import.meta.dirname, '..');
const LOAD_CPU = '0';
const PROXY_CPU = '1';
const children: ChildProcess[] = [];
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

function load(build: string, origin: string, loadSeconds: number): Promise<LoadResult> {
  const headers = { 'content-type': 'application/json', authorization: 'Bearer sk-bench' };
  return runLoad(build, { url: `${origin}/v1/chat/completions`, seconds: loadSeconds, connections: 32, rate, headers, body }, LOAD_CPU);
}

const baseBuild = buildRevision(ROOT, base);
const currentBuild = buildRevision(ROOT, null);
const upstream = await startPinned(children, LOAD_CPU, join(currentBuild, 'bench/servers/upstream.js'), ['0'], [], agentSized ? { N_CTX: '262144' } : {});
const startBase = async () => ({ name: `base (${base})`, ...(await startPinned(children, PROXY_CPU, join(baseBuild, 'bench/servers/compactor.js'), [upstream.origin, config])) });
const startWorking = async () => ({
  name: ['working tree', ...(configB === config ? [] : [configB]), ...nodeFlagsB, ...Object.entries(envB).map(([name, value]) => `${name}=${value}`)].join(', '),
  ...(await startPinned(children, PROXY_CPU, join(currentBuild, 'bench/servers/compactor.js'), [upstream.origin, configB], nodeFlagsB, envB)),
});
const sides = swap ? [await startWorking(), await startBase()] : [await startBase(), await startWorking()];
const [baseIndex, workingIndex] = swap ? [1, 0] : [0, 1];
await Promise.all(sides.map((side) => load(currentBuild, side.origin, 2)));
await sleep(1000);

console.log(`Side by side on CPU ${PROXY_CPU}, ${agentSized ? `${bodyName.replace('k', ' KB')} agent` : '2 KB chat'} body,${swap ? ' working tree first,' : ''} ${rate} req/s offered to each, ${rounds} rounds of ${seconds} s, config ${config}${configB === config ? '' : ` (working tree: ${configB})`}, Node ${process.version}, load average ${readFileSync('/proc/loadavg', 'utf8').split(' ')[0]}:`);
console.log('');
console.log(`| round | ${sides.map((side) => `${side.name} µs CPU / request`).join(' | ')} | ratio |`);
console.log('|---|---|---|---|');
const ratios: number[] = [];
for (let round = 1; round <= rounds; round++) {
  const before = sides.map((side) => cpuMicros(side.child.pid!));
  const results = await Promise.all(sides.map((side) => load(currentBuild, side.origin, seconds)));
  await sleep(300);
  const perRequest = sides.map((side, index) => (cpuMicros(side.child.pid!) - before[index]!) / results[index]!.total);
  for (const [index, result] of results.entries()) {
    if (result.non2xx > 0 || result.errors > 0) throw new Error(`${sides[index]!.name}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  }
  const ratio = perRequest[workingIndex]! / perRequest[baseIndex]!;
  ratios.push(ratio);
  console.log(`| ${round} | ${perRequest.map((micros) => micros.toFixed(1)).join(' | ')} | ${ratio.toFixed(3)} |`);
}
ratios.sort((a, b) => a - b);
const middle = ratios.length / 2;
const median = ratios.length % 2 === 1 ? ratios[Math.floor(middle)]! : (ratios[middle - 1]! + ratios[middle]!) / 2;
console.log('');
console.log(`Median ratio (working tree / base): ${median.toFixed(3)}`);
for (const child of children) child.kill('SIGTERM');
process.exit(0);
