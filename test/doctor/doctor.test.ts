import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runDoctor } from '../../src/doctor/command.js';
import type { Check } from '../../src/doctor/check.js';
import { CHECKS } from '../../src/doctor/checks.js';
import { doctorContext } from '../../src/doctor/questions.js';
import { runChecks } from '../../src/doctor/verdicts.js';
import { serverOf } from '../../src/doctor/store-probe.js';
import { parseConfig } from '../../src/config/schema.js';
import { FakeUpstream, replies } from '../support/fake-upstream.js';
import { RedisServer } from '../support/redis-server.js';

/**
 * issue 23, item 5: `compactor doctor` against llama-server's recorded
 * answers (test/fixtures/llama-server/, served by a loopback double) and a
 * real redis-server: one line per check, exit 0 when all is well, 1 with the
 * first thing to fix.
 */

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
const MODEL = '/models/tiny.gguf';

let upstream: FakeUpstream;
let redis: RedisServer;

/** llama-server's answers as recorded; /apply-template with tools answers its recording with tools. */
function recordedLlamaServer(double: FakeUpstream): void {
  const withTools = replies.fixture('apply_template_tools');
  const withoutTools = replies.fixture('apply_template');
  double.route('POST', '/apply-template', (exchange) => ((exchange.request.json as { tools?: unknown }).tools === undefined ? withoutTools : withTools)(exchange));
}

async function doctor(env: Record<string, string>, argv: string[] = []): Promise<{ code: number; out: string; lines: string[] }> {
  let out = '';
  const code = await runDoctor(argv, { COMPACTOR_UPSTREAM_URL: upstream.url, ...env }, (text) => (out += text));
  return { code, out, lines: out.trimEnd().split('\n') };
}

const lineOf = (lines: readonly string[], name: string): string => lines.find((line) => line.slice(5).startsWith(`${name} `)) ?? `(no ${name} line)`;

beforeAll(async () => {
  upstream = await FakeUpstream.start();
  redis = await RedisServer.start();
});
afterAll(async () => {
  await upstream.close();
  await redis.close();
});
afterEach(() => upstream.reset());

describe('compactor doctor on a fleet (issue 39)', () => {
  it('checks every server: a line each, and the first thing to fix names the one that does not answer', async () => {
    recordedLlamaServer(upstream);
    const second = await FakeUpstream.start();
    const dead = await FakeUpstream.start();
    const deadUrl = dead.url;
    await dead.close();
    try {
      const { code, lines } = await doctor({ COMPACTOR_UPSTREAM_URL: `${upstream.url},${second.url},${deadUrl}` });
      expect(lineOf(lines, 'server 1')).toBe(`ok   server 1     ${upstream.url} answers /health`);
      expect(lineOf(lines, 'server 2')).toBe(`ok   server 2     ${second.url} answers /health`);
      expect(lineOf(lines, 'server 3')).toBe(`FAIL server 3     ${deadUrl}: no answer; compactor takes it out until it answers`);
      expect(code).toBe(1);
    } finally {
      await second.close();
    }
  });
});

describe('compactor doctor', () => {
  it('all well against llama-server and Redis: a line per check, exit 0', async () => {
    recordedLlamaServer(upstream);
    const { code, lines, out } = await doctor({ COMPACTOR_CACHE_STORE: 'redis', COMPACTOR_REDIS_URL: redis.url, COMPACTOR_UPSTREAM_API_KEY: 'sk-upstream-secret', COMPACTOR_AUTH_KEYS: 'client-one,client-two', COMPACTOR_REDIS_SECRET: 'signing-secret-of-the-replicas' });
    expect(code, out).toBe(0);
    expect(lines.at(-1)).toBe('all well');
    expect(lineOf(lines, 'upstream')).toBe(`ok   upstream     ${upstream.url} answers and is ready`);
    // props.json: n_ctx 2048 per slot, total_slots 1.
    expect(lineOf(lines, 'models')).toBe(`ok   models       llama-server: ${MODEL} (2048 tokens per slot, from /props); 1 slot(s)`);
    expect(lineOf(lines, 'tokenize')).toBe('ok   tokenize     /tokenize answers (2 tokens for "hello world")');
    // The recorded build answers 404 to a route it has no recording of: the fallback is named.
    expect(lineOf(lines, 'exact count')).toMatch(/^ok {3}exact count {2}\/v1\/chat\/completions\/input_tokens not served \(404\); exact counts go through \/apply-template and \/tokenize$/);
    expect(lineOf(lines, 'template')).toMatch(/^ok {3}template {5}the chat template renders tools \(\d+ characters/);
    expect(lineOf(lines, 'chat')).toMatch(/^ok {3}chat {9}a tiny chat request \(max_tokens 8\) answered in \d+ ms, finish_reason \w+; the server read 25 prompt tokens at 11,374 t\/s and wrote 12 at 1,329 t\/s$/);
    expect(lineOf(lines, 'store')).toMatch(new RegExp(`^ok {3}store {8}redis at redis://127\\.0\\.0\\.1:${redis.port} answers: (Redis|Valkey) \\d+\\.\\d+\\.\\d+$`));
    expect(lineOf(lines, 'mode')).toBe('ok   mode         compact: requests near the window are pruned and summarized; tool pairs: repair');
    expect(lineOf(lines, 'keys')).toBe('ok   keys         upstream.api_key ***; compaction.summary.api_key none; auth.keys 2 (***, ***); auth.admin_keys none; cache.redis.url ' + redis.url + '; cache.redis.secret ***');
    expect(out).not.toContain('sk-upstream-secret');
    expect(out).not.toContain('signing-secret-of-the-replicas');
    expect(out).not.toContain('client-one');
    // 2048 − 512 (a quarter of the window kept for the answer) = 1536; 85% is 1305, 50% is 768.
    expect(lineOf(lines, 'window')).toBe(
      `ok   window       a 2048-token request to ${MODEL} is over its threshold (85% of a 1536-token budget, 512 kept for the answer: 1305 tokens): compactor prunes old tool results and summarizes old turns down to about 768 tokens (50%)`,
    );
    // The configured key is what the doctor sends, as the proxy would.
    expect(upstream.requestsTo('/v1/chat/completions')[0]?.headers['authorization']).toBe('Bearer sk-upstream-secret');
  });

  it('an upstream that is not there: the first thing to fix is to start it, and the upstream checks are not asked', async () => {
    const closed = await FakeUpstream.start();
    const url = closed.url;
    await closed.close();
    const { code, lines } = await doctor({ COMPACTOR_UPSTREAM_URL: url });
    expect(code).toBe(1);
    expect(lineOf(lines, 'upstream')).toMatch(new RegExp(`^FAIL upstream {5}${url.replace(/\./g, '\\.')} is unreachable: .*connection refused`));
    expect(lineOf(lines, 'chat')).toBe('--   chat         not asked: the upstream is not ready');
    expect(lines.at(-1)).toBe(`first thing to fix: start llama-server at ${url}, or point compactor at it (upstream.url, COMPACTOR_UPSTREAM_URL or --upstream)`);
  });

  it('llama-server still loading its model (503): wait for it', async () => {
    upstream.route('GET', '/health', replies.json(503, { error: { code: 503, message: 'Loading model', type: 'unavailable_error' } }));
    const { code, lines } = await doctor({});
    expect(code).toBe(1);
    expect(lineOf(lines, 'upstream')).toMatch(/^FAIL upstream .* is not ready: it answers 503: still loading its model$/);
    expect(lines.at(-1)).toBe('first thing to fix: wait for llama-server to load its model, then run compactor doctor again');
  });

  it('a chat template that drops the tools: start llama-server with --jinja', async () => {
    upstream.route('POST', '/apply-template', replies.fixture('apply_template'));
    const { code, lines } = await doctor({});
    expect(code).toBe(1);
    expect(lineOf(lines, 'template')).toBe('FAIL template     the chat template drops the tools: the model never sees them');
    expect(lines.at(-1)).toBe('first thing to fix: start llama-server with --jinja (and a chat template that supports tools)');
  });

  it('a Redis store that does not answer: the store line fails and says where it looked', async () => {
    recordedLlamaServer(upstream);
    const down = await RedisServer.start();
    const url = down.url;
    await down.close();
    const { code, lines } = await doctor({ COMPACTOR_CACHE_STORE: 'redis', COMPACTOR_REDIS_URL: url });
    expect(code).toBe(1);
    expect(lineOf(lines, 'store')).toMatch(new RegExp(`^FAIL store {8}redis at ${url.replace(/\./g, '\\.')} does not answer: .*ECONNREFUSED`));
    expect(lines.at(-1)).toBe(`first thing to fix: start Redis or Valkey at ${url}, or set cache.redis.url (COMPACTOR_REDIS_URL) to where it runs`);
  });

  it('a window the upstream does not report, and none configured: set context_window', async () => {
    recordedLlamaServer(upstream);
    upstream.route('GET', '/props', replies.json(404, { error: 'not found' }));
    upstream.route('GET', '/v1/models', replies.json(200, { object: 'list', data: [{ id: 'other-server-model', object: 'model' }] }));
    const { code, lines } = await doctor({});
    expect(code).toBe(1);
    expect(lineOf(lines, 'models')).toBe('FAIL models       OpenAI-compatible: other-server-model (window unknown: not reported); slots not reported');
    expect(lineOf(lines, 'window')).toBe('--   window       no model with a known window to plan for');
    expect(lines.at(-1)).toBe('first thing to fix: the upstream does not report other-server-model\'s window: set models."other-server-model".context_window (or --context-window TOKENS)');
    // Configured, it is planned with, and said to be configured.
    const configured = await doctor({ COMPACTOR_CONTEXT_WINDOW: '4096' });
    expect(configured.code, configured.out).toBe(0);
    expect(lineOf(configured.lines, 'models')).toBe('ok   models       OpenAI-compatible: other-server-model (4096 tokens per slot, configured; the server reports none); slots not reported');
  });

  it('issue 37: a configured window larger than the slots the server runs is no "all well": it says which wins and why', async () => {
    recordedLlamaServer(upstream);
    const { code, lines } = await doctor({}, ['--context-window', '16384']);
    expect(code).toBe(1);
    expect(lineOf(lines, 'models')).toBe(`FAIL models       llama-server: ${MODEL} (configured 16384 tokens per slot; the server runs 2048, from /props); 1 slot(s)`);
    expect(lines.at(-1)).toBe(
      'first thing to fix: models."*".context_window (16384) is larger than the 2048 tokens llama-server runs /models/tiny.gguf with: ' +
        'compactor plans with the configuration, so llama-server refuses every prompt past 2048 tokens, and compactor learns 2048 from each refusal for a minute; set it to 2048, or auto',
    );
    // Smaller than the server's: it works, compacting earlier than needed, and says so.
    const smaller = await doctor({}, ['--context-window', '1024']);
    expect(smaller.code).toBe(0);
    expect(lineOf(smaller.lines, 'models')).toMatch(/^warn models {7}llama-server: .*configured 1024 tokens per slot; the server runs 2048, from \/props.*the configured window wins \(models."\*".context_window\)/);
  });

  it('observe mode and an invalid configuration are said as such', async () => {
    recordedLlamaServer(upstream);
    const observing = await doctor({}, ['--observe']);
    expect(lineOf(observing.lines, 'mode')).toMatch(/^ok {3}mode {9}observe: every request is forwarded as sent/);
    expect(lineOf(observing.lines, 'window')).toMatch(/observe mode forwards it as sent and reports that it would compact it$/);
    const invalid = await doctor({ COMPACTOR_PAIRS: 'sometimes' });
    expect(invalid.code).toBe(1);
    expect(invalid.lines.at(-1)).toMatch(/^first thing to fix: the configuration \(pairs: expected one of repair, reject, off/);
  });

  it('the first failing check is the first thing to fix; a check is one more entry of the list', async () => {
    recordedLlamaServer(upstream);
    const parsed = parseConfig({ upstream: { url: upstream.url } });
    if (!parsed.ok) throw new Error(parsed.errors.join('\n'));
    const slots: Check = { name: 'slots', run: async () => ({ verdict: 'fail', text: 'a later check', fix: 'the later fix' }) };
    const first: Check = { name: 'first', run: async () => ({ verdict: 'fail', text: 'an early check', fix: 'the early fix' }) };
    const context = doctorContext(parsed.config, null);
    try {
      const report = await runChecks([first, ...CHECKS, slots], context);
      expect(report.exitCode).toBe(1);
      expect(report.lines).toContain('FAIL slots        a later check');
      expect(report.lines.at(-1)).toBe('first thing to fix: the early fix');
    } finally {
      await context.close();
    }
    // Each question is asked once, however many checks read its answer.
    expect(upstream.requestsTo('/health')).toHaveLength(1);
    expect(upstream.requestsTo('/props')).toHaveLength(1);
  });

  it('says the slots llama-server reports and whether compactor schedules them (issue 28)', async () => {
    recordedLlamaServer(upstream);
    // The recording: total_slots 1, where llama-server already runs one request at a time.
    const one = await doctor({});
    expect(lineOf(one.lines, 'slots')).toBe('ok   slots        llama-server reports 1 slot; upstream.slots: auto (on by default), not scheduled: with one slot llama-server already runs one request at a time (slot_save off)');
    const props = { default_generation_settings: { n_ctx: 2048, params: {} }, total_slots: 4, model_path: MODEL };
    upstream.route('GET', '/props', replies.json(200, props));
    // Issue 33: scheduled by default once the server reports two slots or more.
    const auto = await doctor({});
    expect(auto.code, auto.out).toBe(0);
    expect(lineOf(auto.lines, 'slots')).toBe('ok   slots        llama-server reports 4 slots; upstream.slots: auto (on by default): one conversation per slot, one request at a time in each, a turn waits for its own at most 5000 ms or what re-reading it elsewhere costs (slot_save off; upstream.slots: off lets llama-server pick)');
    const off = await doctor({ COMPACTOR_SLOTS: 'off' });
    expect(lineOf(off.lines, 'slots')).toBe('ok   slots        llama-server reports 4 slots; upstream.slots: off: llama-server picks the slot');
  });

  it('a server that reports no slots is not scheduled, and the slots line says why', async () => {
    recordedLlamaServer(upstream);
    upstream.route('GET', '/props', replies.json(404, { error: 'not found' }));
    upstream.route('GET', '/slots', replies.json(501, { error: { code: 501, message: 'This server does not support slots endpoint.', type: 'not_supported_error' } }));
    upstream.route('GET', '/v1/models', replies.json(200, { object: 'list', data: [{ id: 'other-server-model', object: 'model' }] }));
    const { lines } = await doctor({ COMPACTOR_SLOTS: 'auto', COMPACTOR_CONTEXT_WINDOW: '4096' });
    expect(lineOf(lines, 'slots')).toBe('ok   slots        the upstream reports no slots (/props total_slots, /slots); upstream.slots: auto (on by default), not scheduled: llama-server (or whatever serves) picks the slot');
  });

  it('tells Valkey from Redis by INFO server', () => {
    expect(serverOf('# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.1.1\r\n')).toEqual({ server: 'Valkey', version: '8.1.1' });
    expect(serverOf('# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\n')).toEqual({ server: 'Redis', version: '7.0.15' });
  });

  it('runs as `compactor doctor` from the command line, with its exit code', async () => {
    recordedLlamaServer(upstream);
    const cli = [join(ROOT, 'node_modules/tsx/dist/cli.mjs'), join(ROOT, 'src/main.ts'), 'doctor', '--upstream', upstream.url];
    const { stdout } = await promisify(execFile)(process.execPath, cli, { cwd: ROOT, env: { ...process.env, COMPACTOR_CONFIG: '' } });
    expect(stdout.trimEnd().split('\n').at(-1)).toBe('all well');
    const failing = await promisify(execFile)(process.execPath, [...cli.slice(0, 3), '--upstream', 'http://127.0.0.1:9'], { cwd: ROOT, env: { ...process.env, COMPACTOR_CONFIG: '' } }).then(
      () => ({ code: 0 }),
      (error: { code: number; stdout: string }) => error,
    );
    expect(failing.code).toBe(1);
  }, 30_000);
});
