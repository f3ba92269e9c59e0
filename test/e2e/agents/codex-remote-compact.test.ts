import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { factOf } from '../../support/conversation.js';
import { FakeUpstream } from '../../support/fake-upstream.js';
import { type Proxy, startProxy } from '../../support/proxy.js';
import { SimulatedLlama } from '../../support/simulated-llama.js';
import { CodexScript, RESULT_LINE } from './codex-script.js';
import { AGENT_TIMEOUT_MS, BIN, counterSum, makeSandbox, runAgentCli, type Sandbox } from './harness.js';

/**
 * issue 38 item 1: Codex CLI's remote compaction through compactor.
 * Codex (`@openai/codex` 0.171.0) compacts remotely with its built-in OpenAI
 * provider (codex-rs `supports_remote_compaction()` is `is_openai()`): its
 * automatic compaction, once a response's usage reaches
 * `model_auto_compact_token_limit`, either streams the history to
 * `{base}/responses` ending in a `compaction_trigger` item and expects one
 * `compaction` output item (remote compaction v2, codex-rs
 * compact_remote_v2.rs: in this version its only remote path, `codex
 * features list` shows `remote_compaction_v2  removed`; earlier versions
 * posted the history to `{base}/responses/compact` instead, which
 * test/e2e/responses-compact.test.ts covers with the openai package); it
 * replaces its history with its user messages and the item, and goes on with
 * the item in every later request.
 * Here the built-in provider's base URL is compactor (`openai_base_url`),
 * the main requests go to a scripted double of llama-server's
 * `/v1/responses` (each answered with the next `exec_command` call, which
 * Codex runs for real, then a final text), and the summary to the simulated
 * llama-server's chat completions. Before issue 38 compactor passed both on:
 * the server answered 404 to the one and a function call to the other, and
 * the run failed ("remote compaction v2 expected exactly one compaction
 * output item, got 0").
 *
 * The window is large, so compactor itself never compacts a main request:
 * every compaction in this run is the one Codex asked for.
 */

const WINDOW = 131_072;
const STEPS = 10;
const PART_BYTES = 6_000;
/** Codex's fixed part is about 11k tokens; each step adds about 1.9k (the double's count): the limit is crossed mid-task. */
const AUTO_COMPACT_LIMIT = 20_000;

type Item = Record<string, unknown>;

interface Run {
  readonly sandbox: Sandbox;
  readonly upstream: FakeUpstream;
  readonly llama: SimulatedLlama;
  readonly script: CodexScript;
  readonly proxy: Proxy;
}

const runs: Run[] = [];

async function started(): Promise<Run> {
  const sandbox = makeSandbox();
  const upstream = await FakeUpstream.start();
  const llama = new SimulatedLlama(upstream, { window: WINDOW });
  const script = new CodexScript(llama, STEPS);
  upstream.route('POST', '/v1/responses', script.reply);
  // compactor's defaults: a forced compaction's files take their share of the history Codex asked to shrink, not of the large window.
  const proxy = await startProxy(upstream, { listen: true, config: { compaction: { enabled: true }, upstream: { timeouts: { headers_ms: 60_000, idle_ms: 60_000 } } } });
  const run = { sandbox, upstream, llama, script, proxy };
  runs.push(run);
  return run;
}

afterEach(async () => {
  for (const { proxy, upstream, sandbox } of runs.splice(0)) {
    await proxy.close();
    await upstream.close();
    rmSync(sandbox.root, { recursive: true, force: true });
  }
});

/** Codex's configuration: the built-in OpenAI provider (no model_provider), its base URL at compactor; `extra` lines after. */
function configure({ sandbox, proxy }: Run, extra: readonly string[]): Record<string, string> {
  const codexHome = join(sandbox.home, '.codex');
  mkdirSync(codexHome, { recursive: true });
  writeFileSync(join(codexHome, 'config.toml'), [`model = "local"`, `openai_base_url = "${proxy.url}/v1"`, `model_auto_compact_token_limit = ${AUTO_COMPACT_LIMIT}`, ...extra, ''].join('\n'));
  mkdirSync(join(sandbox.work, 'parts'), { recursive: true });
  for (let step = 0; step < STEPS; step++) {
    writeFileSync(join(sandbox.work, 'parts', `part-${step}.txt`), `${factOf(step)}\n${`part ${step} line of text\n`.repeat(PART_BYTES / 20)}`);
  }
  return { CODEX_HOME: codexHome, OPENAI_API_KEY: 'sk-local' };
}

function texts(items: readonly Item[]): string {
  return JSON.stringify(items);
}

/** Runs `codex exec` on the task and checks that it compacted through compactor `how`, and went on with the item. */
async function expectRemoteCompaction(run: Run, extra: readonly string[], how: string): Promise<void> {
  const { sandbox, proxy, upstream, llama, script } = run;
  const env = { ...sandbox.env, ...configure(run, extra) };
  const result = await runAgentCli(join(BIN, 'codex'), ['exec', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox', '-C', sandbox.work, 'Read every file in parts/ and write result.txt'], { cwd: sandbox.work, env });
  const lines = proxy.logs.requests().map((line) => JSON.stringify(line)).join('\n');
  const output = `exit ${result.code}\n--- stdout\n${result.stdout.slice(-3000)}\n--- stderr\n${result.stderr.slice(-3000)}\n--- compactor\n${lines}`;
  expect(result.code, output).toBe(0);
  expect(readFileSync(join(sandbox.work, 'result.txt'), 'utf8').trim()).toBe(RESULT_LINE);
  expect(script.step, output).toBe(STEPS + 2);
  // Asked the way this Codex asks: its compaction requests are compactor's own (route "compact"), never the server's.
  const compactions = proxy.logs.requests().filter((line) => line['route'] === 'compact');
  expect(compactions.length, output).toBeGreaterThanOrEqual(1);
  for (const line of compactions) expect(line['path']).toBe(how);
  expect(upstream.requestsTo('/v1/responses/compact')).toHaveLength(0);

  const metrics = (await proxy.app.inject({ method: 'GET', url: '/metrics' })).body;
  const count = (outcome: string): number => counterSum(metrics, 'compactor_compaction_items_total', (labels) => labels.includes(`outcome="${outcome}"`));
  expect(count('sealed'), metrics).toBe(compactions.length);
  expect(count('refused')).toBe(0);
  // One summary call per compaction Codex asked for, and none of compactor's own (the window is large).
  expect(llama.summaryRecords.length).toBe(compactions.length);

  // After the compaction, every request carried the item, and each reached the server opened into the summary pair.
  const afterFirst = script.received.findIndex((received) => texts(received.input).includes('[compacted:summary] '));
  expect(afterFirst, output).toBeGreaterThan(0);
  const after = script.received.slice(afterFirst);
  // Each request after the first compaction carried its item, and so did every later compaction request (compactor's
  // own route, not the server's): the files a compaction carries after its notes take room, and a client compacting at
  // its own limit may cross it again.
  expect(count('opened'), output).toBe(after.length + compactions.length - 1);
  for (const received of after) {
    expect(received.input.some((item) => item['type'] === 'compaction')).toBe(false);
    expect(texts(received.input)).toContain('[compacted:summary] Understood; continuing from these notes.');
  }
  // The notes hold the parts read before the compaction (the simulated model lists every fact it was shown).
  expect(texts(after[0]!.input)).toContain(factOf(0));
  // Smaller after than before: the compaction did its work.
  expect(after[0]!.tokens).toBeLessThan(script.received[afterFirst - 1]!.tokens);
  console.log(
    `codex remote compaction via ${how}: ${script.received.length} requests, ${compactions.length} compactions, request ${afterFirst} the first with the item, prompt ${script.received[afterFirst - 1]!.tokens} -> ${after[0]!.tokens} tokens, ${(result.milliseconds / 1000).toFixed(1)} s`,
  );
}

describe('Codex CLI remote compaction through compactor (issue 38 item 1)', () => {
  it(
    'by default (remote compaction v2): codex exec asks /v1/responses with a compaction_trigger mid-task, and goes on with the item, opened upstream into the notes',
    async () => {
      await expectRemoteCompaction(await started(), [], '/v1/responses');
    },
    AGENT_TIMEOUT_MS + 30_000,
  );
});
