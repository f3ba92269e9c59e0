import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { factOf } from '../../support/conversation.js';
import { FakeUpstream } from '../../support/fake-upstream.js';
import { type Proxy, startProxy } from '../../support/proxy.js';
import { SimulatedLlama } from '../../support/simulated-llama.js';
import { CodexScript, RESULT_LINE } from './codex-script.js';
import { AGENT_TIMEOUT_MS, BIN, breaksByCause, counterSum, makeSandbox, runAgentCli, type Sandbox } from './harness.js';

/**
 * issue 16, item 3: Codex CLI (`@openai/codex` 0.171.0, a native binary),
 * headless (`codex exec`, approvals and sandbox off, confined to a temporary
 * working copy), with a provider whose `base_url` is compactor and
 * `wire_api = "responses"`, against a scripted double of llama-server's
 * `/v1/responses`: each main request is answered with the next scripted
 * `exec_command` call (Codex runs it for real), then a final text. Its
 * summaries go to the simulated llama-server's chat completions. Codex's
 * fixed part is about 11k tokens (a 20k-character developer message, 15
 * function tools of 19k characters); each step reads a 6k-character file,
 * so a 24k window crosses epochs mid-task.
 */

const WINDOW = 24_576;
const STEPS = 14;
const PART_BYTES = 6_000;

let sandbox: Sandbox;
let upstream: FakeUpstream;
let proxy: Proxy;
let llama: SimulatedLlama;
let script: CodexScript;

beforeAll(async () => {
  sandbox = makeSandbox();
  upstream = await FakeUpstream.start();
  llama = new SimulatedLlama(upstream, { window: WINDOW });
  script = new CodexScript(llama, STEPS);
  upstream.route('POST', '/v1/responses', script.reply);
  proxy = await startProxy(upstream, { listen: true, config: { compaction: { enabled: true }, upstream: { timeouts: { headers_ms: 60_000, idle_ms: 60_000 } } } });
});
afterAll(async () => {
  await proxy?.close();
  await upstream?.close();
  if (sandbox !== undefined) rmSync(sandbox.root, { recursive: true, force: true });
});

function configure(): Record<string, string> {
  const codexHome = join(sandbox.home, '.codex');
  mkdirSync(codexHome, { recursive: true });
  writeFileSync(
    join(codexHome, 'config.toml'),
    [
      'model = "local"',
      'model_provider = "compactor"',
      '[model_providers.compactor]',
      'name = "llama-server via compactor"',
      `base_url = "${proxy.url}/v1"`,
      'wire_api = "responses"',
      'env_key = "LLAMA_API_KEY"',
      '',
    ].join('\n'),
  );
  mkdirSync(join(sandbox.work, 'parts'), { recursive: true });
  for (let step = 0; step < STEPS; step++) {
    writeFileSync(join(sandbox.work, 'parts', `part-${step}.txt`), `${factOf(step)}\n${`part ${step} line of text\n`.repeat(PART_BYTES / 20)}`);
  }
  return { CODEX_HOME: codexHome, LLAMA_API_KEY: 'sk-local' };
}

describe('Codex CLI through compactor (issue 16, item 3)', () => {
  it(
    'item 3: codex exec completes its task across epochs, one summary call per epoch, every prompt within the window',
    async () => {
      const env = { ...sandbox.env, ...configure() };
      const result = await runAgentCli(join(BIN, 'codex'), ['exec', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox', '-C', sandbox.work, 'Read every file in parts/ and write result.txt'], { cwd: sandbox.work, env });
      const output = `exit ${result.code}\n--- stdout\n${result.stdout.slice(-3000)}\n--- stderr\n${result.stderr.slice(-3000)}`;
      expect(result.code, output).toBe(0);
      expect(readFileSync(join(sandbox.work, 'result.txt'), 'utf8').trim()).toBe(RESULT_LINE);
      expect(script.step).toBe(STEPS + 2);
      for (const received of script.received) {
        expect(received.tokens).toBeLessThanOrEqual(WINDOW);
        expect(received.pairProblems).toBe(0);
      }
      const metrics = (await proxy.app.inject({ method: 'GET', url: '/metrics' })).body;
      const epochs = counterSum(metrics, 'compactor_compactions_total', (labels) => /outcome="(compacted|prepared)"/.test(labels));
      const failures = counterSum(metrics, 'compactor_compactions_total', (labels) => /outcome="(truncated|forwarded|failed|too_large)"/.test(labels));
      const summaries = llama.summaryRecords;
      expect(failures, metrics).toBe(0);
      expect(epochs).toBeGreaterThanOrEqual(1);
      expect(summaries.length).toBe(epochs);
      const firstSummaryAt = summaries[0]!.finishedAt;
      const after = script.received.filter((_, index) => llama.chatRecords[index]!.startedAt > firstSummaryAt);
      const mainReuse = after.reduce((sum, received) => sum + received.cacheTokens, 0) / Math.max(1, after.reduce((sum, received) => sum + received.tokens, 0));
      const summaryPrompt = summaries.reduce((sum, record) => sum + record.promptTokens, 0);
      const summaryCached = summaries.reduce((sum, record) => sum + record.cacheTokens, 0);
      // Codex only appends to its history, and the slot holds its prefix between requests (a summary reads it in suffix mode).
      const breaks = breaksByCause(metrics);
      expect(breaks['client'] ?? 0, JSON.stringify(breaks)).toBe(0);
      expect(breaks['server'] ?? 0, JSON.stringify(breaks)).toBe(0);
      console.log(
        `codex: ${script.received.length} requests, ${epochs} epochs, ${summaries.length} summary calls, largest prompt ${Math.max(...script.received.map((received) => received.tokens))} of ${WINDOW}, KV reuse after the first epoch ${mainReuse.toFixed(3)}, summaries' ${(summaryCached / Math.max(1, summaryPrompt)).toFixed(3)}, prefix breaks ${JSON.stringify(breaks)}, ${(result.milliseconds / 1000).toFixed(1)} s`,
      );
    },
    AGENT_TIMEOUT_MS + 30_000,
  );
});
