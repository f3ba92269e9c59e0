/**
 * Issue 21 items 1 and 2: the largest body allowed (`limits.body_bytes`, 32 MiB
 * by default) of the worst shapes found, checked, planned and forwarded, while
 * another client asks `/healthz` every 10 ms; then the p99 of small chat
 * requests while maximum-size requests keep arriving.
 *
 *   npx tsx bench/hostile-bodies.ts [--bytes=33554432] [--items=50000] [--rounds=3] [--small=200]
 *
 * compactor (bench/servers/compactor.ts) and the lean upstream
 * (bench/servers/upstream.ts) run in their own processes, started here with
 * tsx; the upstream's window is set so each body lands between the soft
 * threshold and the threshold (hashed, looked up, forwarded; a background
 * summary starts after the answer). Each figure is also given for the floor
 * measured in the same run: the same body sent straight to the upstream.
 * Each shape is posted once before its counted rounds: the first large body
 * also pays one-time costs (lazy module loading, JIT, heap growth). Beside
 * the probe's slowest `/healthz`, the compactor process's own longest
 * event-loop stall over the same rounds (monitorEventLoopDelay at 1 ms):
 * and the most CPU time it spent between two turns of its loop: the probe's
 * figure holds the machine's load, the wall stall less, the CPU one least
 * (a process that waits for a core is not spending CPU).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { request } from 'undici';

const flag = (name: string, fallback: number): number => {
  const found = process.argv.find((arg) => arg.startsWith(`--${name}=`));
  return found === undefined ? fallback : Number(found.slice(name.length + 3));
};
const BYTES = flag('bytes', 33_554_432);
const ROUNDS = flag('rounds', 3);
const SMALL = flag('small', 200);
/** `limits.max_items` of the compactor under test (its default). */
const ITEMS = flag('items', 50_000);

const children: ChildProcess[] = [];
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

async function start(script: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ origin: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], env: { ...process.env, ...env } });
  children.push(child);
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${script} exited (${code}) before listening`)));
    child.on('message', (message: { port?: number }) => {
      if (typeof message.port === 'number') resolve(message.port);
    });
  });
  return { origin: `http://127.0.0.1:${port}`, child };
}

/** The compactor process's longest event-loop stall since the last reset, in ms of wall time and of its CPU time (bench/servers/compactor.ts). */
async function stallOf(child: ChildProcess, what: 'reset' | 'read'): Promise<{ wall: number; cpu: number; gc: number }> {
  if (what === 'reset') {
    child.send({ stall: 'reset' });
    return { wall: 0, cpu: 0, gc: 0 };
  }
  return new Promise((resolve) => {
    const listener = (message: { stallMs?: number; stallCpuMs?: number; gcMs?: number }): void => {
      if (typeof message.stallMs !== 'number') return;
      child.off('message', listener);
      resolve({ wall: message.stallMs, cpu: message.stallCpuMs ?? 0, gc: message.gcMs ?? 0 });
    };
    child.on('message', listener);
    child.send({ stall: 'read' });
  });
}

const call = (id: string) => ({ id, type: 'function', function: { name: 'f', arguments: '{}' } });

/** `count` pieces made by `piece(index)`, joined with commas. */
const joined = (count: number, piece: (index: number) => string): string => Array.from({ length: count }, (_, index) => piece(index)).join(',');

/** Text that brings `count` pieces of `base` bytes each to about `bytes` in all (a 3% margin keeps the body under the limit). */
const padFor = (bytes: number, count: number, base: number): string => 'p'.repeat(Math.max(0, Math.floor((bytes * 0.97) / count) - base));

/** The shape: n assistant messages each calling "x", then their n results (all misplaced but one), within `items`. */
function sharedIdBody(bytes: number, items: number): string {
  const pairs = Math.floor((items - 1) / 3);
  const pad = padFor(bytes, pairs, 120);
  const assistants = joined(pairs, () => JSON.stringify({ role: 'assistant', content: '', tool_calls: [call('x')] }));
  const results = joined(pairs, () => JSON.stringify({ role: 'tool', tool_call_id: 'x', content: pad }));
  return `{"model":"bench","messages":[{"role":"user","content":"go"},${assistants},${results}]}`;
}

/** An agent loop of steps: each message hashed, grouped and estimated; results padded to fill the body. */
function agentBody(bytes: number, items: number): string {
  const steps = Math.floor((items - 1) / 3.2);
  const pad = padFor(bytes, steps, 160);
  const messages = joined(steps, (index) =>
    [
      ...(index % 5 === 0 ? [JSON.stringify({ role: 'user', content: `t${index}` })] : []),
      JSON.stringify({ role: 'assistant', content: '', tool_calls: [call(`c${index}`)] }),
      JSON.stringify({ role: 'tool', tool_call_id: `c${index}`, content: `ok ${pad}` }),
    ].join(','),
  );
  return `{"model":"bench","messages":[{"role":"system","content":"s"},${messages}]}`;
}

/** Messages API: one assistant turn of n tool_use blocks, one user turn of their results plus an orphan, within `items`. */
function messagesBody(bytes: number, items: number): string {
  const blocks = Math.floor((items - 4) / 2);
  const pad = padFor(bytes, blocks, 120);
  const uses = joined(blocks, (index) => JSON.stringify({ type: 'tool_use', id: `t${index}`, name: 'f', input: {} }));
  const results = joined(blocks, (index) => JSON.stringify({ type: 'tool_result', tool_use_id: `t${index}`, content: pad }));
  const orphan = JSON.stringify({ type: 'tool_result', tool_use_id: 'orphan', content: 'r' });
  return `{"model":"bench","max_tokens":16,"messages":[{"role":"user","content":"go"},{"role":"assistant","content":[${uses}]},{"role":"user","content":[${results},${orphan}]}]}`;
}

/** Issue 34 item 2: no messages, parts or calls past the first, so `limits.max_items` never counts them: `count` empty objects beside (10 million in 28.6 MiB). */
function uncountedBody(count: number): string {
  return `{"model":"bench","messages":[{"role":"user","content":"go"}],"x":[${'{},'.repeat(count - 1)}{}]}`;
}

/** The body `make` builds with as many items as fit in BYTES, starting from `items`. */
function underLimit(make: (items: number) => string, items: number): string {
  let body = make(items);
  while (Buffer.byteLength(body) > BYTES) body = make((items = Math.floor(items * (BYTES / Buffer.byteLength(body)) * 0.98)));
  return body;
}

/** Polls /healthz every 10 ms until stopped; returns the slowest answer in ms. */
function healthProbe(origin: string): () => Promise<number> {
  let worst = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const started = performance.now();
      const response = await request(`${origin}/healthz`);
      await response.body.text();
      worst = Math.max(worst, performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  })();
  return async () => {
    running = false;
    await loop;
    return worst;
  };
}

async function post(origin: string, path: string, body: string): Promise<{ ms: number; status: number; report: string }> {
  const started = performance.now();
  const response = await request(`${origin}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body, headersTimeout: 120_000, bodyTimeout: 120_000 });
  await response.body.text();
  const report = response.headers['x-compactor'];
  return { ms: performance.now() - started, status: response.statusCode, report: typeof report === 'string' ? report : '' };
}

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const percentile = (values: number[], p: number): number => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.ceil((p / 100) * values.length) - 1)]!;

/** The floor of any proxy that must look into a chat body, measured here in the same run: parse it, serialize it again. */
function parseFloor(body: string): number {
  const started = performance.now();
  JSON.stringify(JSON.parse(body));
  return performance.now() - started;
}

async function largestBodies(compactor: string, process_: ChildProcess, upstream: string): Promise<void> {
  const shapes: [string, string, string][] = [
    [`chat: n calls of "x", then n results (${ITEMS} items)`, '/v1/chat/completions', sharedIdBody(BYTES, ITEMS)],
    [`chat: agent loop (${ITEMS} items)`, '/v1/chat/completions', agentBody(BYTES, ITEMS)],
    [`messages: n tool_use + n tool_result + orphan (${ITEMS} items)`, '/v1/messages', messagesBody(BYTES, ITEMS)],
    ['chat: agent loop of tiny steps, past the cap (refused)', '/v1/chat/completions', underLimit((items) => agentBody(BYTES, items), Math.floor(BYTES / 40))],
    ['chat: 10 million empty objects beside one message (uncounted by max_items)', '/v1/chat/completions', uncountedBody(Math.min(10_000_000, Math.floor(BYTES / 3.2)))],
  ];
  console.log(`| shape | body | compactor: sent to answered (median of ${ROUNDS}) | straight to the upstream | JSON parse + serialize alone | slowest /healthz meanwhile | longest loop stall in compactor: wall, CPU; longest GC | answer |`);
  console.log('|---|---|---|---|---|---|---|---|');
  for (const [name, path, body] of shapes) {
    const times: number[] = [];
    const floors: number[] = [];
    const parses: number[] = [];
    let worstHealth = 0;
    const worstStall = { wall: 0, cpu: 0, gc: 0 };
    let last = { ms: 0, status: 0, report: '' };
    // One round first, not counted: the first large body also pays one-time costs (lazy module loading, JIT, heap growth).
    await post(compactor, path, body);
    for (let round = 0; round < ROUNDS; round++) {
      floors.push((await post(upstream, '/v1/chat/completions', body)).ms);
      parses.push(parseFloor(body));
      await stallOf(process_, 'reset');
      const stop = healthProbe(compactor);
      last = await post(compactor, path, body);
      times.push(last.ms);
      worstHealth = Math.max(worstHealth, await stop());
      const stall = await stallOf(process_, 'read');
      worstStall.wall = Math.max(worstStall.wall, stall.wall);
      worstStall.cpu = Math.max(worstStall.cpu, stall.cpu);
      worstStall.gc = Math.max(worstStall.gc, stall.gc);
    }
    const row = [name, `${(Buffer.byteLength(body) / 1048576).toFixed(1)} MiB`, `${median(times).toFixed(0)} ms`, `${median(floors).toFixed(0)} ms`, `${median(parses).toFixed(0)} ms`, `${worstHealth.toFixed(0)} ms`, `${worstStall.wall.toFixed(0)} ms, ${worstStall.cpu.toFixed(0)} ms; ${worstStall.gc.toFixed(0)} ms`, `${last.status} ${last.report}`];
    console.log(`| ${row.join(' | ')} |`);
  }
}

/** Small requests one after another while maximum-size requests arrive back to back; small requests alone as the baseline. */
async function smallUnderLarge(compactor: string, process_: ChildProcess): Promise<void> {
  const small = JSON.stringify({ model: 'bench', messages: [{ role: 'user', content: 'hi' }] });
  const run = async (): Promise<number[]> => {
    const times: number[] = [];
    for (let index = 0; index < SMALL; index++) times.push((await post(compactor, '/v1/chat/completions', small)).ms);
    return times;
  };
  const alone = await run();
  const large = agentBody(BYTES, ITEMS);
  let flooding = true;
  const largeTimes: number[] = [];
  const flood = (async () => {
    while (flooding) largeTimes.push((await post(compactor, '/v1/chat/completions', large)).ms);
  })();
  await stallOf(process_, 'reset');
  const underLoad = await run();
  flooding = false;
  await flood;
  const stall = await stallOf(process_, 'read');
  console.log(`\n| small chat requests (${SMALL}) | p50 | p99 | max | longest loop stall in compactor: wall, CPU; longest GC |`);
  console.log('|---|---|---|---|---|');
  console.log(`| alone | ${median(alone).toFixed(1)} ms | ${percentile(alone, 99).toFixed(1)} ms | ${Math.max(...alone).toFixed(1)} ms | |`);
  console.log(`| while ${largeTimes.length} requests of ${(BYTES / 1048576).toFixed(0)} MiB arrived back to back (each answered in ${median(largeTimes).toFixed(0)} ms, median) | ${median(underLoad).toFixed(1)} ms | ${percentile(underLoad, 99).toFixed(1)} ms | ${Math.max(...underLoad).toFixed(1)} ms | ${stall.wall.toFixed(0)} ms, ${stall.cpu.toFixed(0)} ms; ${stall.gc.toFixed(0)} ms |`);
}

async function main(): Promise<void> {
  // About 1.25 tokens per 4 bytes learned: a window of ~BYTES/2 tokens puts a full body between soft threshold and threshold.
  const upstream = (await start('bench/servers/upstream.ts', ['0'], { N_CTX: String(Math.round(BYTES / 2)) })).origin;
  const compactor = await start('bench/servers/compactor.ts', [upstream, JSON.stringify({ log: { level: 'warn' } })]);
  await largestBodies(compactor.origin, compactor.child, upstream);
  await smallUnderLarge(compactor.origin, compactor.child);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
