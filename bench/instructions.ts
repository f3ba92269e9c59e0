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
import { agentBody, chatBody, sendRequests } from './load-client.js';

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

/**
 * Instructions the garbage collector spent in a dump, by each function's own (self) cost: the scavenges that land
 * in the measured requests (a 2 KB request allocates some tens of KB, so 300 requests hold one, two or three
 * scavenges) move the total by ±5%, more than the steps this bench measures; the count without them and without
 * the compiler is the work the requests' own code did. Allocation itself stays in that count. A full collection
 * lands in some runs too (+400-500k a request at 2 KB): the memory reducer's (src/http/ops/memory-reducer.ts),
 * which collects after 2 s without a new request, a gap `callgrind_control -z` can leave on a loaded machine;
 * the names its work runs under (moving objects, updating pointers, the free lists) are counted here too.
 */
const COLLECTOR =
  /Scaveng|MarkCompact|Marking|Sweep|Evacuat|PromotedObject|RememberedSet|SlotSet|BodyDescriptor|GCTracer|MinorMC|MemoryChunkData|LiveObjectRange|PointersUpdating|StringTableCleaner|IterateObjectCache|RelocIterator|FreeList|SizeFromMap|Heap::(?:CollectGarbage|PerformGarbageCollection|Scavenge|GarbageCollection)/;

function collectorFraction(dump: string): number {
  // The callgrind format: `fn=(id) name` names the function the cost lines below it are charged to (later `fn=(id)` alone),
  // and the line after a `calls=` line is the cost of that call (the callee's inclusive cost), not the caller's own.
  const names = new Map<string, string>();
  let collecting = false;
  let afterCall = false;
  let sum = 0;
  let all = 0;
  for (const line of readFileSync(dump, 'utf8').split('\n')) {
    if (line.startsWith('fn=') || line.startsWith('cfn=')) {
      const match = /^c?fn=\((\d+)\)(?: (.*))?$/.exec(line);
      if (match === null) continue;
      if (match[2] !== undefined) names.set(match[1]!, match[2]);
      if (line.startsWith('fn=')) collecting = COLLECTOR.test(names.get(match[1]!) ?? '');
    } else if (line.startsWith('calls=')) afterCall = true;
    else if (/^[0-9+\-*]/.test(line)) {
      if (afterCall) afterCall = false;
      else {
        const cost = Number(line.split(' ')[1] ?? 0);
        all += cost;
        if (collecting) sum += cost;
      }
    }
  }
  // A fraction of the cost lines' sum (the dump's `totals:`, which here runs ~5% above the `summary:` the total is taken from).
  return all === 0 ? 0 : sum / all;
}

const send = (origin: string, count: number): Promise<void> => sendRequests(origin, count, connections, headers, body);

/** The columns of one dump (or several, each a thread's or a process's): total, the compiler's, the collector's. */
function countsOf(dumps: readonly string[]): { total: number; compiling: number; collecting: number } {
  let total = 0;
  let compiling = 0;
  let collecting = 0;
  for (const dump of dumps) {
    const dumpTotal = Number(/^(?:summary|totals): (\d+)/m.exec(readFileSync(dump, 'utf8'))?.[1] ?? 0);
    total += dumpTotal;
    compiling += compilerShare(dump);
    collecting += collectorFraction(dump) * dumpTotal;
  }
  return { total, compiling, collecting };
}

function row(variant: string, { total, compiling, collecting }: { total: number; compiling: number; collecting: number }): string {
  const perRequest = (count: number): string => Math.round(count / requests).toLocaleString('en-US');
  return `| ${variant} | ${perRequest(total)} | ${perRequest(total - compiling)} | ${((100 * compiling) / total).toFixed(1)}% | ${perRequest(total - compiling - collecting)} |`;
}

const HEADER = "| variant | instructions / request | without the optimizing compiler | the compiler's share | without the compiler and the collector |\n|---|---|---|---|---|";

// `--dump=FILE --requests=N`: the columns of a dump an earlier run left (its folder is printed on stderr).
const dumpGiven = option('dump', '');
if (dumpGiven !== '') {
  console.log(HEADER);
  console.log(row(basename(dumpGiven), countsOf([dumpGiven])));
  process.exit(0);
}

if (build === ownBuild) execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'bench/servers/tsconfig.json', '--outDir', ownBuild], { stdio: 'inherit' });
const upstream = await start([process.execPath, `${build}/bench/servers/upstream.js`, '0'], { N_CTX: bodyName === '2k' ? '32768' : '262144' });
console.log(`Instructions per request (callgrind, all threads), ${bodyName} body, ${requests} requests at c=${connections} after ${warm} to warm up, build ${build}, Node ${process.version}:`);
console.log('');
console.log(HEADER);
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
  // The dumps after the zeroing (".1"): their totals are the measured requests' work.
  const dumps = readdirSync(out)
    .filter((name) => name.endsWith('.1'))
    .map((name) => join(out, name));
  if (dumps.length === 0) throw new Error(`no callgrind dump in ${out}: ${readdirSync(out).join(', ')}`);
  console.log(row(variant, countsOf(dumps)));
  console.error(`${variant}: callgrind's dump in ${out}`);
  proxy.child.kill('SIGKILL');
}
for (const child of children) child.kill('SIGTERM');
process.exit(0);
