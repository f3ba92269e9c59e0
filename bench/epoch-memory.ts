/**
 * Memory of many conversations with a cached epoch (issue 26 item 4): does
 * `cache.max_bytes` bound what compactor holds, whatever `cache.max_entries`
 * says? Each conversation is an agent's: the same 12 KB system prompt, then a
 * ~37 KB history of its own, over the threshold of a 12k window so its first request
 * summarizes and stores an epoch. Two compactors in one run, one after the
 * other on the same upstream: the bound in bytes as configured, and no byte
 * bound to speak of (only `max_entries`, as before).
 *
 *   npx tsx bench/epoch-memory.ts                        (20,000 conversations)
 *   npx tsx bench/epoch-memory.ts --conversations=2000   (a smoke run)
 *   npx tsx bench/epoch-memory.ts --max-bytes=67108864
 *   npx tsx bench/epoch-memory.ts --node-flags="--max-semi-space-size=2"   (compactor started with these)
 *
 * RSS and heap are read by the compactor process itself after two full
 * collections (bench/servers/compactor.ts, `--expose-gc`), and the store's
 * own figure from /metrics (`compactor_epoch_cache_bytes`).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { Pool } from 'undici';

const option = (name: string, fallback: string): string => process.argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const conversations = Number(option('conversations', '20000'));
const maxBytes = Number(option('max-bytes', String(128 * 1024 * 1024)));
const CONCURRENCY = 16;
// Summary notes of a real size (issue 27 measured 10–25 KB of JSON notes per epoch).
const notesBytes = Number(option('notes-bytes', '12000'));
const BUILD = `node_modules/.cache/compactor-bench-${basename(process.cwd())}`;
const nodeFlags = option('node-flags', '').split(' ').filter((flag) => flag !== '');

const children: ChildProcess[] = [];
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

async function start(script: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ child: ChildProcess; origin: string }> {
  const flags = script.endsWith('compactor.js') ? nodeFlags : [];
  const child = spawn(process.execPath, ['--expose-gc', ...flags, `${BUILD}/${script}`, ...args], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], env: { ...process.env, ...env } });
  children.push(child);
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${script} exited (${code})`)));
    child.on('message', (message: { port?: number }) => {
      if (typeof message.port === 'number') resolve(message.port);
    });
  });
  return { child, origin: `http://127.0.0.1:${port}` };
}

const SYSTEM = 'You are a coding agent working in a TypeScript repository. Follow the project rules. '.repeat(150).slice(0, 12_000);

/** Conversation `index`: the shared system prompt, then ~37 KB of turns of its own. */
function history(index: number): string {
  const messages: Array<{ role: string; content: string }> = [{ role: 'system', content: SYSTEM }];
  for (let turn = 0; turn < 12; turn++) {
    messages.push({ role: 'user', content: `Conversation ${index}, turn ${turn}: ${'please look at the failing test and explain. '.repeat(35)}` });
    messages.push({ role: 'assistant', content: `Conversation ${index}, answer ${turn}: ${'the fixture path is wrong; change it and rerun. '.repeat(30)}` });
  }
  messages.push({ role: 'user', content: `Conversation ${index}: what next?` });
  return JSON.stringify({ model: 'bench', messages, max_tokens: 256 });
}

interface Memory {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
}

function memoryOf(child: ChildProcess): Promise<Memory> {
  return new Promise((resolve) => {
    const onMessage = (message: { memory?: Memory }): void => {
      if (message.memory === undefined) return;
      child.off('message', onMessage);
      resolve(message.memory);
    };
    child.on('message', onMessage);
    child.send({ memory: true });
  });
}

async function gauge(origin: string, name: string): Promise<number> {
  const text = await (await fetch(`${origin}/metrics`)).text();
  const line = text.split('\n').find((row) => row.startsWith(`${name} `));
  return line === undefined ? Number.NaN : Number(line.split(' ')[1]);
}

async function run(label: string, cache: Record<string, number>): Promise<string> {
  // A 12k window: the 49 KB conversation (~12k tokens) is over the threshold, so its first request summarizes the old turns and keeps the recent ones raw, as an agent's would.
  const upstream = await start('bench/servers/upstream.js', ['0'], { N_CTX: '12288', ANSWER_BYTES: String(notesBytes) });
  const proxy = await start('bench/servers/compactor.js', [upstream.origin, JSON.stringify({ compaction: { enabled: true }, cache, log: { level: 'warn' } })]);
  const pool = new Pool(proxy.origin, { connections: CONCURRENCY });
  const before = await memoryOf(proxy.child);
  let next = 0;
  let compacted = 0;
  const started = Date.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < conversations) {
        const index = next++;
        const response = await pool.request({ method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json' }, body: history(index) });
        await response.body.arrayBuffer();
        if (response.statusCode !== 200) throw new Error(`conversation ${index}: ${response.statusCode}`);
        const report = String(response.headers['x-compactor'] ?? '');
        if (index === 0) console.error(`${label}: the first conversation's report: ${report}`);
        if (report.startsWith('summarized')) compacted++;
      }
    }),
  );
  const seconds = (Date.now() - started) / 1000;
  const after = await memoryOf(proxy.child);
  const entries = await gauge(proxy.origin, 'compactor_epoch_cache_entries');
  const bytes = await gauge(proxy.origin, 'compactor_epoch_cache_bytes');
  await pool.close();
  for (const child of [proxy.child, upstream.child]) child.kill('SIGTERM');
  const mib = (value: number): string => (value / 1024 / 1024).toFixed(0);
  return `| ${label} | ${conversations} (${compacted} summarized) | ${entries} | ${mib(bytes)} | ${mib(before.rss)} → ${mib(after.rss)} | ${mib(before.heapUsed)} → ${mib(after.heapUsed)} | ${mib(after.heapTotal)} | ${mib(after.external)} | ${seconds.toFixed(0)} |`;
}

execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'bench/servers/tsconfig.json', '--outDir', BUILD], { stdio: 'inherit' });
const mebibytes = `${(maxBytes / 1024 / 1024).toFixed(0)} MiB`;
const rows = [
  await run(`max_entries 10000, max_bytes ${mebibytes} (the defaults)`, { max_entries: 10_000, max_bytes: maxBytes }),
  await run(`max_entries 100000, max_bytes ${mebibytes}`, { max_entries: 100_000, max_bytes: maxBytes }),
  await run('max_entries 100000, max_bytes 8 GiB (entries only, as before)', { max_entries: 100_000, max_bytes: 8 * 1024 ** 3 }),
];
console.log(`Epoch memory, Node ${process.version}${nodeFlags.length === 0 ? '' : ` (${nodeFlags.join(' ')})`}, load average ${readFileSync('/proc/loadavg', 'utf8').split(' ')[0]}, 12 KB shared system prompt + ~37 KB history per conversation, notes of ${notesBytes} bytes, ${CONCURRENCY} at a time:`);
console.log('');
console.log('| cache | conversations | epochs held | store MiB (its own figure) | RSS MiB before → after | heap used MiB before → after | heap total MiB after | external MiB after | seconds |');
console.log('|---|---|---|---|---|---|---|---|---|');
for (const row of rows) console.log(row);
process.exit(0);
