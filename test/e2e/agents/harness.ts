import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect } from 'vitest';
import { spawnOwned } from '../../support/child-processes.js';
import { FakeUpstream } from '../../support/fake-upstream.js';
import { type Proxy, startProxy } from '../../support/proxy.js';
import { NOTES_OPENING, type ReceivedChat, ScriptedLlama, contentText } from './scripted-llama.js';
import type { ChatMessage } from '../../../src/transcript/message.js';
import { BREAK_CAUSES } from '../../../src/http/ledger/prefix-breaks.js';
import { CATALOG_TESTS, CHANGELOG_LINE, FIXED_DISCOUNT, FIXED_FORMAT, SHOP_SCRIPT, TAX, TAX_TEST, writeProject } from './shop-project.js';

/**
 * One agent run: a temporary home (HOME and the XDG directories, so the
 * agent reads no configuration of the machine's user), a temporary copy of
 * the shop project, compactor in-process in front of a scripted llama-server
 * with the given window, and the agent's CLI started in the project.
 */

/** The agent CLIs' own install (package.json and lock beside this file), made by install.ts before the first agent test. */
export const BIN = join(dirname(fileURLToPath(import.meta.url)), 'node_modules/.bin');

/** An agent run that has not finished by then has hung; each file's test timeout is set above it. */
export const AGENT_TIMEOUT_MS = 180_000;

export interface Sandbox {
  readonly root: string;
  readonly home: string;
  readonly work: string;
  /** PATH (for node, rg, git) and the temporary HOME / XDG directories; nothing else of the test's environment. */
  readonly env: Record<string, string>;
}

export function makeSandbox(): Sandbox {
  const root = mkdtempSync(join(tmpdir(), 'compactor-agent-'));
  const home = join(root, 'home');
  const work = join(root, 'shop');
  const xdg = { XDG_CONFIG_HOME: join(home, '.config'), XDG_DATA_HOME: join(home, '.local/share'), XDG_CACHE_HOME: join(home, '.cache'), XDG_STATE_HOME: join(home, '.local/state') };
  for (const directory of [home, work, ...Object.values(xdg)]) mkdirSync(directory, { recursive: true });
  writeProject(work);
  const env = { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: home, USERPROFILE: home, TMPDIR: join(root, 'tmp'), LANG: 'C.UTF-8', NO_COLOR: '1', CI: '1', ...xdg };
  mkdirSync(env.TMPDIR, { recursive: true });
  return { root, home, work, env };
}

export interface Harness {
  readonly sandbox: Sandbox;
  readonly upstream: FakeUpstream;
  readonly llama: ScriptedLlama;
  readonly proxy: Proxy;
  readonly window: number;
  close(): Promise<void>;
}

/** BENCH_COMPRESS=off: the run without the compression tier, its baseline. */
function compressOff(): boolean {
  return process.env['BENCH_COMPRESS'] === 'off';
}

export async function startHarness(window: number): Promise<Harness> {
  const sandbox = makeSandbox();
  const upstream = await FakeUpstream.start();
  const llama = new ScriptedLlama({ script: SHOP_SCRIPT, workDirectory: sandbox.work, window }).attach(upstream);
  const proxy = await startProxy(upstream, {
    listen: true,
    config: {
      // BENCH_COMPRESS=off measures the agent runs without the compression tier (bench/README.md § compress.ts).
      compaction: { enabled: true, ...(compressOff() ? { compress: { enabled: false } } : {}) },
      // Agents wait for their answer; a summary of the double takes milliseconds, so these only bound a hang.
      upstream: { timeouts: { headers_ms: 60_000, idle_ms: 60_000 } },
    },
  });
  return {
    sandbox,
    upstream,
    llama,
    proxy,
    window,
    async close() {
      await proxy.close();
      await upstream.close();
      rmSync(sandbox.root, { recursive: true, force: true });
    },
  };
}

export interface AgentResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly milliseconds: number;
}

/** Runs the agent's CLI to its end (or kills it after {@link AGENT_TIMEOUT_MS}). */
export async function runAgentCli(command: string, args: readonly string[], options: { cwd: string; env: Record<string, string> }): Promise<AgentResult> {
  const started = Date.now();
  const child = spawnOwned(command, args, { cwd: options.cwd, env: options.env });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), AGENT_TIMEOUT_MS);
  const code = await new Promise<number | null>((resolve) => child.once('close', (exitCode) => resolve(exitCode)));
  clearTimeout(timer);
  return { code, stdout, stderr, milliseconds: Date.now() - started };
}

/** Sums a Prometheus counter's samples whose labels `match` picks. */
export function counterSum(metrics: string, name: string, match: (labels: string) => boolean = () => true): number {
  let sum = 0;
  for (const line of metrics.split('\n')) {
    const sample = /^(\w+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (sample === null || sample[1] !== name || !match(sample[2] ?? '')) continue;
    sum += Number(sample[3]);
  }
  return sum;
}

export interface RunFigures {
  readonly fixedTokens: number;
  readonly window: number;
  readonly requests: { readonly main: number; readonly summary: number; readonly side: number };
  readonly epochs: number;
  /** Epochs the compression tier made (no model call). */
  readonly compressions: number;
  /** Main requests that showed the model at least one compressed result. */
  readonly compressedPrompts: number;
  readonly largestPrompt: number;
  /** Prompt tokens of every main request, as the double counted them: what was forwarded in all. */
  readonly forwarded: number;
  /** The prefix-break ledger's count by cause (`compactor_prefix_breaks_total{cause}`), causes with none left out. */
  readonly breaks: Readonly<Record<string, number>>;
  /** Summaries the main requests showed the model: each new notes text is one summary applied. */
  readonly appliedSummaries: number;
  /** Tokens the double reported from its slot's cache (`cache_n`) over all it was sent (prompt tokens), main and summary requests. */
  readonly cacheReuse: number;
  readonly seconds: number;
}

/** How many times the notes a main request carries changed from the request before (a first one counted too): the summaries applied. */
export function appliedSummaries(main: readonly ReceivedChat[]): number {
  let applied = 0;
  let last: string | undefined;
  for (const request of main) {
    const notes = (request.body['messages'] as ChatMessage[]).map((message) => contentText(message.content)).find((text) => text.includes(NOTES_OPENING));
    if (notes !== undefined && notes !== last) applied++;
    last = notes;
  }
  return applied;
}

/** `compactor_prefix_breaks_total` by its `cause` label, causes counted zero left out. */
export function breaksByCause(metrics: string): Record<string, number> {
  const breaks: Record<string, number> = {};
  for (const cause of BREAK_CAUSES) {
    const count = counterSum(metrics, 'compactor_prefix_breaks_total', (labels) => labels.includes(`cause="${cause}"`));
    if (count > 0) breaks[cause] = count;
  }
  return breaks;
}

/** The fixed part of the agent's main requests (its system messages and tools), by the double's tokenizer. */
export function fixedPartTokens(body: Record<string, unknown>): number {
  const messages = body['messages'] as Array<{ role: string }>;
  const head = messages.filter((message) => message.role === 'system');
  return Math.ceil(Buffer.byteLength(JSON.stringify({ messages: head, tools: body['tools'] ?? null })) / 4);
}

/**
 * The pass criteria of an agent run: it exited 0, the files changed as
 * scripted, the tests ran (their output came back in a tool result), every
 * forwarded prompt fit the window with valid tool-call pairs, the script
 * ran to its end, and there was one summary call per epoch, at least two.
 */
export async function expectScriptedRunPassed(harness: Harness, result: AgentResult): Promise<RunFigures> {
  const { llama, sandbox, window } = harness;
  const output = `exit ${result.code}\n--- stdout\n${result.stdout.slice(-3000)}\n--- stderr\n${result.stderr.slice(-3000)}`;
  expect(result.code, output).toBe(0);

  const read = (path: string): string => readFileSync(join(sandbox.work, path), 'utf8');
  expect(read('src/cart.js')).toContain(FIXED_DISCOUNT);
  expect(read('src/format.js')).toContain(FIXED_FORMAT);
  expect(read('src/tax.js')).toBe(TAX);
  expect(read('test/tax.test.js')).toBe(TAX_TEST);
  expect(read('docs/changelog.md')).toContain(CHANGELOG_LINE);

  const main = llama.requestsOf('main');
  expect(main.map((request) => request.step)).toEqual(SHOP_SCRIPT.map((_, index) => index));
  const results = llama.toolResults();
  // The first run fails on both bugs; the last passes all four tests of the cart and tax and the catalog's. Node 20's node --test reports
  // in TAP when not on a terminal (`# fail 2`), Node 23 and later in its spec format (`ℹ fail 2`).
  const summary = (field: string, count: number): RegExp => new RegExp(`(?:# |ℹ )${field} ${count}\\b`);
  expect(results.some((text) => summary('fail', 2).test(text)), 'a failing node --test run came back').toBe(true);
  expect(results.some((text) => summary('pass', 4 + CATALOG_TESTS).test(text) && summary('fail', 0).test(text)), 'a passing node --test run came back').toBe(true);
  // The failing read came back as the agent's error, not as a crash.
  expect(results.some((text) => text.includes('discounts.js'))).toBe(true);

  for (const request of llama.received) {
    expect(request.tokens, `a ${request.kind} request of ${request.tokens} tokens against a ${window}-token window`).toBeLessThanOrEqual(window);
    expect(request.pairProblems, `the tool-call pairs of a ${request.kind} request`).toEqual([]);
  }

  const metrics = (await harness.proxy.app.inject({ method: 'GET', url: '/metrics' })).body;
  const made = (tiers: string): number => counterSum(metrics, 'compactor_compactions_total', (labels) => new RegExp(`tier="(${tiers})"`).test(labels) && /outcome="(compacted|prepared)"/.test(labels));
  const epochs = made('prune|compress|summary|steps');
  const compressions = made('compress');
  const failures = counterSum(metrics, 'compactor_compactions_total', (labels) => /outcome="(truncated|forwarded|failed|too_large)"/.test(labels));
  const summaries = llama.requestsOf('summary').length;
  expect(failures, metrics).toBe(0);
  expect(epochs).toBeGreaterThanOrEqual(2);
  // One summary call per summary epoch; a compression or a pruning calls no model.
  expect(summaries).toBe(made('summary|steps'));
  expect(counterSum(metrics, 'compactor_summary_calls_total')).toBe(summaries);
  // The agent re-reads what it edits and re-runs its tests: with the tier on (the default), it compresses (in an epoch
  // of its own, or in what a summary keeps), and the model is shown markers; without it, never.
  const compressedPrompts = main.filter((request) => (request.body['messages'] as ChatMessage[]).some((message) => message.role === 'tool' && contentText(message.content).includes('[compressed: '))).length;
  if (compressOff()) expect(compressedPrompts).toBe(0);
  else expect(compressedPrompts, 'main requests showing compressed results').toBeGreaterThanOrEqual(1);

  // The prefix-break ledger (issue 36) against what the double saw: these agents only append to their history, so
  // no break is the client's; the one slot keeps the conversation's prefix between its requests (compactor's summary
  // calls read it in suffix mode), so the server never reuses less than the unchanged prefix; each summary shown to
  // the model breaks the prefix once, and each compression epoch at most once.
  const breaks = breaksByCause(metrics);
  const applied = appliedSummaries(main);
  expect(breaks['client'] ?? 0, JSON.stringify(breaks)).toBe(0);
  expect(breaks['server'] ?? 0, JSON.stringify(breaks)).toBe(0);
  expect(breaks['summary'] ?? 0, JSON.stringify(breaks)).toBe(applied);
  expect(breaks['compression'] ?? 0, JSON.stringify(breaks)).toBeLessThanOrEqual(compressions);

  return {
    fixedTokens: fixedPartTokens(main[0]!.body),
    window,
    requests: { main: main.length, summary: summaries, side: llama.requestsOf('side').length },
    epochs,
    compressions,
    compressedPrompts,
    largestPrompt: Math.max(...llama.received.map((request) => request.tokens)),
    forwarded: main.reduce((sum, request) => sum + request.tokens, 0),
    breaks,
    appliedSummaries: applied,
    cacheReuse: Number((llama.received.reduce((sum, request) => sum + request.cached, 0) / llama.received.reduce((sum, request) => sum + request.tokens, 0)).toFixed(3)),
    seconds: result.milliseconds / 1000,
  };
}

/** A harness for the whole test file: started before its tests, closed after them (also when one fails). */
export function harnessForFile(window: number): () => Harness {
  let harness: Harness | undefined;
  beforeAll(async () => {
    harness = await startHarness(window);
  });
  afterAll(async () => {
    await harness?.close();
  });
  return () => harness!;
}

/**
 * Runs an agent CLI of the agents' node_modules/.bin in the harness's sandbox, with the
 * configuration `configure` writes (pointing it at compactor), and checks the
 * scripted run passed: the figures of the run.
 */
export async function runScriptedAgent(
  harness: Harness,
  command: string,
  args: readonly string[],
  configure: (baseUrl: string, home: string) => Record<string, string>,
): Promise<RunFigures> {
  const { sandbox, proxy } = harness;
  const env = { ...sandbox.env, ...configure(proxy.url, sandbox.home) };
  const result = await runAgentCli(join(BIN, command), args, { cwd: sandbox.work, env });
  return expectScriptedRunPassed(harness, result);
}
