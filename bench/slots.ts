/**
 * Slot scheduling (issue 28): N coding-agent conversations at once through
 * compactor, against the llama-server slot double (test/support/slot-llama.ts:
 * N slots, similarity/LRU choice, the host-RAM prompt cache on or off,
 * id_slot, save/restore), 40 turns each, the whole history every turn, no
 * think time. Each scenario runs twice in the same process: `upstream.slots:
 * off` (llama-server picks, before) and `auto` (a home slot per conversation
 * and a slot queue, after); with `--cache-ram 0` also `auto` + `slot_save`.
 *
 *   npx tsx bench/slots.ts            (SUMMARIES=1: with background summaries; REPEAT=3: each figure's median of three; ONLY=8x4,8x2;
 *                                      MODES=default,off: those modes in that order, `default` leaving upstream.slots unset;
 *                                      PROXY=process: compactor in a process of its own, as deployed, not on this one's event loop)
 *
 * Reported per run: KV reuse (prompt tokens served from a cache / prompt
 * tokens) against the ideal (each conversation alone on its own slot
 * forever: its prompts replayed on a one-slot model of its own), prompt
 * tokens processed, p50/p99 of a turn as the client saw it, the p99 and
 * the maximum of the slot-queue waits, the requests pinned to a busy slot,
 * saves and restores.
 *
 * The double's clock: a task takes prompt tokens processed × 0.01 ms plus
 * 16 generated tokens × 2 ms (one turn's generation: 32 ms); slots run in
 * parallel (a real server shares its compute between them: absolute times
 * are the double's, the ratios between the runs are what counts).
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { defaultConfig } from '../src/config/schema.js';
import type { ChatMessage } from '../src/transcript/message.js';
import { FakeUpstream } from '../test/support/fake-upstream.js';
import { startProxy } from '../test/support/proxy.js';
import { SlotLlama } from '../test/support/slot-llama.js';
import { SlotModel } from '../test/support/slot-model.js';

const TURNS = Number(process.env['TURNS'] ?? 40);
const GENERATED = 16;
const MS_PER_GENERATED = 2;
const SUMMARIES = process.env['SUMMARIES'] === '1';

interface Scenario {
  readonly conversations: number;
  readonly slots: number;
  readonly ram: boolean;
}

interface Row {
  readonly scenario: Scenario;
  readonly mode: string;
  readonly reuse: number;
  readonly ideal: number;
  readonly processed: number;
  readonly p50: number;
  readonly p99: number;
  readonly waitP99: number;
  readonly waitMax: number;
  readonly busyPins: number;
  readonly failed: number;
  readonly saves: number;
  readonly restores: number;
  readonly seconds: number;
}

function percentile(values: number[], share: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(share * sorted.length))]!;
}

/** The agent's system prompt and tools are the same for every conversation (as with one agent run 8 times): only what follows differs. */
const SYSTEM = 'You are a coding agent. Use the tools to read, edit and test code. '.repeat(60);

function toolResult(conversation: number, turn: number): string {
  // ~300 tokens a turn: 40 turns make a 13k-token history, like the issue's measured conversations (an 11.8k-token slot).
  return `conversation ${conversation}, turn ${turn}: `.padEnd(1200, `${conversation}${turn} output line `);
}

/** A conversation's tasks (its turns and summaries): those whose first turn in the prompt is its own (after an epoch its first turns are summarized away). */
function tasksOf(llama: SlotLlama, conversation: number): SlotLlama['tasks'] {
  return llama.tasks.filter((task) => /conversation (\d+), turn \d+:/.exec(task.prompt)?.[1] === String(conversation));
}

/** Each conversation's prompts, replayed on a one-slot model of its own: the reuse of a slot never shared. */
function idealReuse(llama: SlotLlama, conversations: number): number {
  let reused = 0;
  let total = 0;
  for (let conversation = 0; conversation < conversations; conversation++) {
    const alone = new SlotModel({ slots: 1, cacheRamTokens: 0 });
    // Its slot starts with the shared system prompt, which the runs read once for all conversations.
    alone.begin(0, `<|im_start|>system\n${SYSTEM}<|im_end|>\n`);
    alone.end(0, '');
    alone.counters.promptTokens = 0;
    alone.counters.reusedTokens = 0;
    for (const task of tasksOf(llama, conversation)) {
      alone.begin(0, task.prompt);
      alone.end(0, `Answer of ${GENERATED} tokens. `.padEnd(GENERATED * 4, '.'));
    }
    reused += alone.counters.reusedTokens;
    total += alone.counters.promptTokens;
  }
  return reused / total;
}

/**
 * DIAG=1: where each run lost reuse against the ideal, task by task. A task's
 * ideal is what its conversation's own slot would have held; what it lost is
 * blamed on where the longest copy of its prompt was when it started: in a
 * busy slot (its summary or another conversation ran there), in another
 * idle slot (it went to the wrong one), or nowhere (evicted and not kept by
 * the RAM cache).
 */
function diagnose(llama: SlotLlama, conversations: number, label: string): void {
  const lost = { busy: 0, idle: 0, nowhere: 0, gained: 0 };
  const byKind = { turn: 0, summary: 0 };
  const lines: string[] = [];
  for (let conversation = 0; conversation < conversations; conversation++) {
    const alone = new SlotModel({ slots: 1, cacheRamTokens: 0 });
    alone.begin(0, `<|im_start|>system\n${SYSTEM}<|im_end|>\n`);
    alone.end(0, '');
    let index = 0;
    for (const task of tasksOf(llama, conversation)) {
      const ideal = alone.begin(0, task.prompt).cacheN;
      alone.end(0, `Answer of ${GENERATED} tokens. `.padEnd(GENERATED * 4, '.'));
      index++;
      const loss = ideal - task.cacheN;
      if (process.env['DIAG'] === '3') lines.push(`  c${conversation} #${index}${task.summary ? ' summary' : ''} slot ${task.slot} at ${task.startedAt.toFixed(0)} queued ${task.queuedMs.toFixed(0)}: cache ${task.cacheN} of ideal ${ideal} prompt ${task.cacheN + task.promptN} (own ${task.copies.own}, idle ${task.copies.idle}, busy ${task.copies.busy}, ram ${task.copies.ram})`);
      if (loss <= 0) {
        lost.gained -= loss;
        continue;
      }
      const { own, idle, busy, ram } = task.copies;
      const best = Math.max(own, ram);
      const where = busy > best && busy >= idle ? 'busy' : idle > best ? 'idle' : 'nowhere';
      lost[where] += loss;
      byKind[task.summary ? 'summary' : 'turn'] += loss;
      if (process.env['DIAG'] === '2') lines.push(`  c${conversation} #${index}${task.summary ? ' summary' : ''} slot ${task.slot}${task.pinned === null ? '' : ' (pinned)'} at ${task.startedAt.toFixed(0)}: cache ${task.cacheN} of ideal ${ideal} (own ${own}, idle ${idle}, busy ${busy}, ram ${ram}) → ${where}`);
    }
  }
  console.log(`${label}: lost vs ideal ${lost.busy} in a busy slot, ${lost.idle} in another idle slot, ${lost.nowhere} nowhere (turns ${byKind.turn}, summaries ${byKind.summary}); gained ${lost.gained}`);
  const processed = (tasks: SlotLlama['tasks']): number => tasks.reduce((sum, task) => sum + task.promptN, 0);
  const summaries = llama.tasks.filter((task) => task.summary);
  console.log(`  ${llama.tasks.length - summaries.length} turns read ${processed(llama.tasks.filter((task) => !task.summary))} tokens, ${summaries.length} summaries ${processed(summaries)}`);
  for (const line of lines) console.log(line);
}

/**
 * compactor as deployed: its own process (bench/servers/compactor.ts), so its hand-over of a slot from one request
 * to the next does not wait behind the clients' and the double's work on one event loop, which `off` never pays
 * (llama-server queues the next request itself). Its request log lines are read from its stdout.
 */
async function startProxyProcess(upstreamUrl: string, config: Record<string, unknown>): Promise<{ url: string; logs: { requests(): Array<Record<string, unknown>> }; close(): Promise<void> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/servers/compactor.ts', upstreamUrl, JSON.stringify(config)], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  const lines: Array<Record<string, unknown>> = [];
  createInterface({ input: child.stdout! }).on('line', (line) => {
    try {
      lines.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // Not a log line.
    }
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`compactor exited (${code}) before listening`)));
    child.on('message', (message: { port?: number }) => {
      if (typeof message.port === 'number') resolve(message.port);
    });
  });
  return {
    url: `http://127.0.0.1:${port}`,
    logs: { requests: () => lines.filter((line) => line['route'] !== undefined) },
    close: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

// default: upstream.slots not set (auto since issue 33, on a server of two slots or more).
type Mode = 'off' | 'auto' | 'auto+save' | 'default';

// upstream.slot_wait_ms's default (5 s: one or two turns' generation on a GPU) on the double's clock: two turns' generation.
const SLOT_WAIT_MS = 2 * GENERATED * MS_PER_GENERATED;

async function run(scenario: Scenario, mode: Mode): Promise<Row> {
  const upstream = await FakeUpstream.start();
  const llama = new SlotLlama(upstream, {
    slots: scenario.slots,
    cacheRamTokens: scenario.ram ? Number.POSITIVE_INFINITY : 0,
    slotSave: true,
    // With summaries: a window the histories outgrow (soft threshold near turn 22, threshold near turn 31).
    window: SUMMARIES ? 12288 : 65536,
    // A summary writes ten turns' worth (a real model's takes tens of seconds, a turn seconds).
    summaryGeneratedTokens: GENERATED * 10,
    msPerPromptToken: 0.01,
    msPerGeneratedToken: MS_PER_GENERATED,
    generatedTokens: GENERATED,
  });
  // `default` is the schema's own default (the test config the proxy starts from sets off).
  const slots = { slots: mode === 'default' ? defaultConfig().upstream.slots : mode === 'off' ? 'off' : 'auto', slot_save: mode === 'auto+save', slot_wait_ms: SLOT_WAIT_MS };
  const compaction = SUMMARIES ? { enabled: true, summary: { concurrency: scenario.slots } } : { enabled: false };
  const proxy = process.env['PROXY'] === 'process' ? await startProxyProcess(upstream.url, { upstream: slots, compaction, log: { level: 'info' } }) : await startProxy(upstream, { listen: true, config: { upstream: slots, compaction, log: { level: 'info' } } });
  const latencies: number[] = [];
  const slowest: Array<{ ms: number; what: string }> = [];
  let failed = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: scenario.conversations }, async (_, conversation) => {
      let history: ChatMessage[] = [{ role: 'system', content: SYSTEM }];
      for (let turn = 1; turn <= TURNS; turn++) {
        history = [...history, { role: 'user', content: toolResult(conversation, turn) }];
        const sentAt = performance.now();
        const response = await fetch(`${proxy.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'sim', messages: history }),
        });
        const answer = (await response.json()) as { choices?: Array<{ message: { content: string } }> };
        latencies.push(performance.now() - sentAt);
        slowest.push({ ms: performance.now() - sentAt, what: `c${conversation} t${turn} at ${sentAt.toFixed(0)}` });
        if (response.status !== 200) failed++;
        history = [...history, { role: 'assistant', content: answer.choices?.[0]?.message.content ?? '' }];
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const waits = proxy.logs
    .requests()
    .map((line: Record<string, unknown>) => line['slotWaitMs'])
    .filter((wait): wait is number => typeof wait === 'number');
  await proxy.close();
  await upstream.close();
  const { counters } = llama.model;
  if (process.env['DIAG'] !== undefined) {
    diagnose(llama, scenario.conversations, `${scenario.conversations} on ${scenario.slots} ram ${scenario.ram ? 'on' : '0'} ${mode}`);
    console.log(`  slowest turns: ${slowest.sort((a, b) => b.ms - a.ms).slice(0, 8).map((entry) => `${entry.what} ${entry.ms.toFixed(0)} ms`).join(', ')}`);
  }
  return {
    scenario,
    mode,
    reuse: llama.model.reuse,
    ideal: idealReuse(llama, scenario.conversations),
    processed: counters.processedTokens,
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
    waitP99: percentile(waits, 0.99),
    waitMax: Math.max(0, ...waits),
    busyPins: counters.busyPins,
    failed,
    saves: counters.saves,
    restores: counters.restores,
    seconds,
  };
}

/** Each figure's median over the runs of one mode (the upper one of an even count). */
function medianRow(runs: Row[]): Row {
  const median = (figure: (row: Row) => number): number => percentile(runs.map(figure), 0.5);
  return {
    ...runs[0]!,
    reuse: median((row) => row.reuse),
    ideal: median((row) => row.ideal),
    processed: median((row) => row.processed),
    p50: median((row) => row.p50),
    p99: median((row) => row.p99),
    waitP99: median((row) => row.waitP99),
    waitMax: median((row) => row.waitMax),
    busyPins: median((row) => row.busyPins),
    failed: Math.max(...runs.map((row) => row.failed)),
    saves: median((row) => row.saves),
    restores: median((row) => row.restores),
    seconds: median((row) => row.seconds),
  };
}

const scenarios: Scenario[] = [
  { conversations: 4, slots: 4, ram: true },
  { conversations: 8, slots: 4, ram: true },
  { conversations: 8, slots: 2, ram: true },
  { conversations: 8, slots: 4, ram: false },
  { conversations: 8, slots: 2, ram: false },
];

// ONLY=8x2 runs the scenarios of 8 conversations on 2 slots alone.
const only = process.env['ONLY'];
// REPEAT=3: each mode run three times, interleaved (off, auto, auto+save, off, …), and the median of each figure
// reported (each figure's own median, so one row may mix runs): the machine is shared, and one run's p99 is the
// fourth-worst of 320 turns.
const REPEAT = Number(process.env['REPEAT'] ?? 1);
// MODES=default,off: those modes, in that order (the machine is shared: run both orders).
const MODES = (process.env['MODES'] ?? 'off,auto,auto+save').split(',') as Mode[];
const rows: Row[] = [];
// RAM=on: only the scenarios with llama-server's RAM prompt cache (RAM=0: only those without).
const ram = process.env['RAM'];
for (const scenario of scenarios.filter((entry) => (only === undefined || only.split(',').includes(`${entry.conversations}x${entry.slots}`)) && (ram === undefined || (ram === 'on') === entry.ram))) {
  const runs = new Map<Mode, Row[]>(MODES.map((mode) => [mode, []]));
  for (let round = 0; round < REPEAT; round++) {
    for (const mode of MODES) {
      const row = await run(scenario, mode);
      runs.get(mode)!.push(row);
      // Every run, so the spread behind a median shows.
      if (REPEAT > 1) console.log(`run ${round + 1}: ${scenario.conversations} on ${scenario.slots} ${mode}: KV reuse ${(row.reuse * 100).toFixed(1)}%, ${(row.processed / 1000).toFixed(0)}k processed, p99 ${row.p99.toFixed(0)} ms, wall ${row.seconds.toFixed(1)} s`);
    }
  }
  for (const mode of MODES) rows.push(medianRow(runs.get(mode)!));
}
console.log(`${TURNS} turns per conversation${SUMMARIES ? ', compaction on (background summaries, each ten turns of generation)' : ''}; a turn's generation: ${GENERATED * MS_PER_GENERATED} ms; slot_wait_ms ${SLOT_WAIT_MS}\n`);
console.log('| conversations on slots | RAM cache | upstream.slots | KV reuse | ideal | prompt tokens processed | p50 ms | p99 ms | slot wait p99 / max ms | busy pins | failed | saves / restores | wall s |');
console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
for (const row of rows) {
  const { scenario } = row;
  console.log(
    `| ${scenario.conversations} on ${scenario.slots} | ${scenario.ram ? 'on' : '0'} | ${row.mode} | ${(row.reuse * 100).toFixed(1)}% | ${(row.ideal * 100).toFixed(1)}% | ${(row.processed / 1000).toFixed(0)}k | ${row.p50.toFixed(0)} | ${row.p99.toFixed(0)} | ${row.waitP99.toFixed(0)} / ${row.waitMax.toFixed(0)} | ${row.busyPins} | ${row.failed} | ${row.saves} / ${row.restores} | ${row.seconds.toFixed(1)} |`,
  );
}
