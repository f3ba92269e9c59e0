import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseDocument } from 'yaml';
import { loadConfig, printableConfig } from '../../src/config/load.js';
import { defaultConfig, parseConfig } from '../../src/config/schema.js';
import { leafPaths } from '../support/config-paths.js';
import { spawnOwned } from '../support/child-processes.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');

describe('defaultConfig', () => {
  it('listens on 127.0.0.1:8081 and forwards to http://127.0.0.1:8080 with the documented defaults', () => {
    const config = defaultConfig();
    expect(config.listen).toEqual({ host: '127.0.0.1', port: 8081 });
    expect(config.upstream).toEqual({
      url: 'http://127.0.0.1:8080',
      servers: [{ url: 'http://127.0.0.1:8080', api_key: null, weight: 1, models: null }],
      api_key: null,
      health_interval_ms: 5000,
      timeouts: { connect_ms: 5000, headers_ms: 600000, idle_ms: 300000 },
      slots: 'auto',
      slot_wait_ms: 5000,
      slot_save: false,
      slot_save_max_bytes: 10 * 1024 ** 3,
      slot_save_shared: false,
    });
    expect(config.models).toEqual({ '*': { context_window: 'auto', reserve_output_tokens: 1024 } });
    expect(config.pairs).toBe('repair');
    expect(config.limits.body_bytes).toBe(32 * 1024 * 1024);
    expect(config.auth.keys).toEqual([]);
    expect(config.log).toEqual({ level: 'info', format: 'json' });
    expect(config.compaction.summary).toEqual({
      model: null,
      upstream: null,
      api_key: null,
      max_tokens: 1024,
      timeout_ms: 300000,
      concurrency: 1,
      max_queued_per_tenant: 16,
      max_queued_background: 64,
      prompt_file: null,
    });
  });

  it('issue 25: compaction.compress is on with the measured defaults, clearing off; COMPACTOR_COMPRESS turns it off', () => {
    expect(defaultConfig().compaction.compress).toEqual({
      enabled: true,
      clear_at_least: 2048,
      superseded: true,
      identical: true,
      structure: true,
      min_result_chars: 400,
      keep_items: 3,
      keep_lines: 5,
      read_tools: ['read', 'read_file', 'read_many_files', 'view', 'view_file', 'open', 'open_file', 'cat', 'fetch', 'web_fetch', 'get_file_contents'],
      clear: { keep: 0, exclude_tools: [] },
    });
    // read_tools: a list of names, named in the error when it is not.
    const names = parseConfig({ compaction: { compress: { read_tools: 'read' } } });
    expect(names.ok).toBe(false);
    if (!names.ok) expect(names.errors.join('\n')).toContain('compaction.compress.read_tools');
    expect(loadConfig({ env: { COMPACTOR_COMPRESS: 'off' } })).toMatchObject({ ok: true, config: { compaction: { compress: { enabled: false } } } });
    const bad = parseConfig({ compaction: { compress: { clear_at_least: -1, clear: { keep: 2, exclude_tools: [1] } } } });
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.errors.join('\n')).toMatch(/compaction\.compress\.clear_at_least[\s\S]*compaction\.compress\.clear\.exclude_tools/);
  });

  it('config.example.yaml, read by the real loader, is exactly the defaults', () => {
    const loaded = loadConfig({ argv: ['--config', join(ROOT, 'config.example.yaml')], env: {} });
    expect(loaded.ok).toBe(true);
    if (loaded.ok) expect(loaded.config).toEqual(defaultConfig());
  });

  it('config.example.yaml writes out every key, each with a comment on when to change it', () => {
    const text = readFileSync(join(ROOT, 'config.example.yaml'), 'utf8');
    const written = leafPaths(parseDocument(text).toJS() as unknown);
    expect(written.sort()).toEqual(leafPaths(defaultConfig()).sort());
    // A leaf is a line `key: value` that is not the start of a section; each carries its comment.
    const leafLines = text.split('\n').filter((line) => /^\s*("\*"|\w+):\s*[^\s#]/.test(line));
    expect(leafLines.length).toBe(written.length);
    for (const line of leafLines) expect(line, line).toMatch(/#\s*\S.{10,}/);
  });
});

describe('parseConfig', () => {
  it('lists every error with its path', () => {
    const result = parseConfig({
      upstream: { url: 'not a url', timeouts: { headers_ms: -5 } },
      listen: { prot: 8081 },
      pairs: 'sometimes',
      models: { qwen: { context_window: 'big' } },
      auth: { keys: [''] },
      log: { level: 'loud' },
    });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.errors).toEqual(
      expect.arrayContaining([
        'upstream.url: expected a URL',
        'upstream.timeouts.headers_ms: expected a positive number',
        // Issue 37: a misspelled key gets a suggestion, as a misspelled environment variable does.
        'listen.prot: unknown key (did you mean listen.port?)',
        'pairs: expected one of repair, reject, off',
        'models.qwen.context_window: expected "auto" or a positive integer',
        'auth.keys[0]: expected a non-empty key',
        'log.level: expected one of fatal, error, warn, info, debug, trace, silent',
      ]),
    );
    expect(result.errors).toHaveLength(7);
  });

  it('accepts every key now, including those used by later features, and fills the rest', () => {
    const result = parseConfig({
      models: { 'qwen2.5': { context_window: 32768 } },
      compaction: { threshold: 0.9, max_messages: 200, summary: { model: 'small', upstream: 'http://10.0.0.2:8080' }, on_summary_failure: 'error' },
      cache: { ttl_s: 60 },
    });
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.config.models['qwen2.5']).toEqual({ context_window: 32768, reserve_output_tokens: 1024 });
    expect(result.config.models['*']).toEqual({ context_window: 'auto', reserve_output_tokens: 1024 });
    expect(result.config.compaction.summary.concurrency).toBe(1);
    expect(result.config.cache).toMatchObject({ max_entries: 10000, ttl_s: 60, store: 'memory' });
  });

  it('checks the thresholds against each other', () => {
    const result = parseConfig({ compaction: { threshold: 0.7, target: 0.8 } });
    expect(result).toEqual({ ok: false, errors: [expect.stringMatching(/^compaction\.target: must be below compaction\.threshold \(0.7\)/)] });
  });
});

describe('loadConfig', () => {
  const file = (text: string): string => {
    const directory = mkdtempSync(join(tmpdir(), 'compactor-config-'));
    const path = join(directory, 'config.yaml');
    writeFileSync(path, text);
    return path;
  };

  it('applies file, then environment, then flags', () => {
    const path = file('listen: { port: 9000, host: 0.0.0.0 }\nupstream: { url: "http://file:1" }\n');
    const loaded = loadConfig({
      argv: ['--port', '9002'],
      env: { COMPACTOR_CONFIG: path, COMPACTOR_PORT: '9001', COMPACTOR_UPSTREAM_URL: 'http://env:2', COMPACTOR_UPSTREAM_API_KEY: 'k' },
    });
    expect(loaded.ok).toBe(true);
    if (!loaded.ok) return;
    expect(loaded.config.listen).toEqual({ host: '0.0.0.0', port: 9002 });
    expect(loaded.config.upstream.url).toBe('http://env:2');
    expect(loaded.config.upstream.api_key).toBe('k');
    expect(loaded.file).toBe(path);
  });

  it('names the source of a bad override', () => {
    const loaded = loadConfig({ argv: ['--upstream', 'nope'], env: { COMPACTOR_PORT: 'eighty' } });
    expect(loaded).toEqual({
      ok: false,
      errors: ['listen.port: expected a port number (from COMPACTOR_PORT)', 'upstream.url: expected a URL (from --upstream)'],
    });
  });

  it('reports unreadable files, YAML syntax errors, unknown flags', () => {
    expect(loadConfig({ argv: ['--config', '/nonexistent/compactor.yaml'] })).toEqual({
      ok: false,
      errors: ['cannot read the config file /nonexistent/compactor.yaml (ENOENT)'],
    });
    const broken = loadConfig({ argv: ['--config', file('listen: [1\n')] });
    expect(broken.ok).toBe(false);
    const unknown = loadConfig({ argv: ['--prot', '1'] });
    expect(unknown.ok).toBe(false);
    if (!unknown.ok) expect(unknown.errors[0]).toMatch(/--prot/);
  });

  it('sets the common keys from COMPACTOR_* variables and flags, flags winning', () => {
    const loaded = loadConfig({
      argv: ['--context-window', '32768', '--compaction', 'off', '--summary-model', 'small', '--pairs', 'reject', '--max-messages', '200'],
      env: {
        COMPACTOR_CONTEXT_WINDOW: '8192',
        COMPACTOR_AUTH_KEYS: 'key-one, key-two,',
        COMPACTOR_SUMMARY_UPSTREAM: 'http://127.0.0.1:8090',
        COMPACTOR_SUMMARY_PROMPT_FILE: '/etc/compactor/prompt.txt',
        COMPACTOR_LOG_LEVEL: 'warn',
        COMPACTOR_LOG_FORMAT: 'pretty',
      },
    });
    expect(loaded.ok).toBe(true);
    if (!loaded.ok) return;
    expect(loaded.config.models['*']).toEqual({ context_window: 32768, reserve_output_tokens: 1024 });
    expect(loaded.config.compaction.enabled).toBe(false);
    expect(loaded.config.compaction.max_messages).toBe(200);
    expect(loaded.config.compaction.summary).toMatchObject({ model: 'small', upstream: 'http://127.0.0.1:8090', prompt_file: '/etc/compactor/prompt.txt' });
    expect(loaded.config.pairs).toBe('reject');
    expect(loaded.config.auth.keys).toEqual(['key-one', 'key-two']);
    expect(loaded.config.log).toEqual({ level: 'warn', format: 'pretty' });
    expect(loadConfig({ argv: ['--log-format', 'json'], env: { COMPACTOR_LOG_FORMAT: 'pretty' } })).toMatchObject({ ok: true, config: { log: { format: 'json' } } });
    expect(loadConfig({ env: { COMPACTOR_LOG_FORMAT: 'colour' } })).toMatchObject({ ok: false });
    expect(loaded.printConfig).toBe(false);
    expect(loadConfig({ env: { COMPACTOR_CONTEXT_WINDOW: 'auto', COMPACTOR_COMPACTION: 'true' } })).toMatchObject({
      ok: true,
      config: { models: { '*': { context_window: 'auto' } }, compaction: { enabled: true } },
    });
  });

  it('keeps the other models of the file when the window flag sets "*"', () => {
    const path = file('models:\n  qwen: { context_window: 4096 }\n  "*": { reserve_output_tokens: 2048 }\n');
    const loaded = loadConfig({ argv: ['--config', path, '--context-window', '16384'] });
    expect(loaded.ok && loaded.config.models).toEqual({
      qwen: { context_window: 4096, reserve_output_tokens: 1024 },
      '*': { context_window: 16384, reserve_output_tokens: 2048 },
    });
  });

  it('reports a bad value of a new override with its source, and takes no secret from a flag', () => {
    expect(loadConfig({ argv: ['--compaction', 'maybe'], env: { COMPACTOR_CONTEXT_WINDOW: 'big' } })).toEqual({
      ok: false,
      errors: [
        'models["*"].context_window: expected "auto" or a positive integer (from COMPACTOR_CONTEXT_WINDOW)',
        'compaction.enabled: expected true or false (from --compaction)',
      ],
    });
    expect(loadConfig({ argv: ['--api-key', 'secret'] }).ok).toBe(false);
  });

  it('--print-config: the effective configuration as YAML, secrets masked', () => {
    const loaded = loadConfig({
      argv: ['--print-config', '--upstream', 'http://user:hunter2@127.0.0.1:8080'],
      env: { COMPACTOR_UPSTREAM_API_KEY: 'sk-upstream', COMPACTOR_AUTH_KEYS: 'sk-one,sk-two' },
    });
    expect(loaded.ok && loaded.printConfig).toBe(true);
    if (!loaded.ok) return;
    const printed = printableConfig(loaded.config);
    expect(printed).not.toMatch(/hunter2|sk-upstream|sk-one|sk-two/);
    const shown = parseDocument(printed).toJS() as ReturnType<typeof defaultConfig>;
    expect(shown.upstream.api_key).toBe('***');
    expect(shown.upstream.url).toBe('http://user:***@127.0.0.1:8080/');
    expect(shown.auth.keys).toEqual(['***', '***']);
    // Everything else as it is in force.
    expect({ ...shown, upstream: null, auth: null }).toEqual({ ...loaded.config, upstream: null, auth: null });
    expect(parseDocument(printableConfig(defaultConfig())).toJS()).toEqual(defaultConfig());
  });

  it('--print-config masks cache.redis.secret too: it signs every stored epoch', () => {
    const loaded = loadConfig({ env: { COMPACTOR_CACHE_STORE: 'redis', COMPACTOR_REDIS_URL: 'redis://cache:6379', COMPACTOR_REDIS_SECRET: 'a-long-random-string-per-deployment' } });
    if (!loaded.ok) throw new Error(loaded.errors.join('; '));
    const printed = printableConfig(loaded.config);
    expect(printed).not.toContain('a-long-random-string-per-deployment');
    expect((parseDocument(printed).toJS() as ReturnType<typeof defaultConfig>).cache.redis.secret).toBe('***');
  });

  it('item 4: compaction.summary.api_key comes from COMPACTOR_SUMMARY_API_KEY, never a flag, and is masked', () => {
    const loaded = loadConfig({ argv: ['--print-config'], env: { COMPACTOR_SUMMARY_API_KEY: 'sk-summary' } });
    expect(loaded.ok).toBe(true);
    if (!loaded.ok) return;
    expect(loaded.config.compaction.summary.api_key).toBe('sk-summary');
    expect(defaultConfig().compaction.summary.api_key).toBeNull();
    const printed = printableConfig(loaded.config);
    expect(printed).not.toContain('sk-summary');
    expect((parseDocument(printed).toJS() as ReturnType<typeof defaultConfig>).compaction.summary.api_key).toBe('***');
    expect(loadConfig({ argv: ['--summary-api-key', 'sk-summary'] }).ok).toBe(false);
  });

  it('cache.store redis (issue 15): COMPACTOR_CACHE_STORE and COMPACTOR_REDIS_URL, a redis:// or rediss:// URL required, its password masked', () => {
    const loaded = loadConfig({ env: { COMPACTOR_CACHE_STORE: 'redis', COMPACTOR_REDIS_URL: 'rediss://:hunter2@cache.internal:6380/2' } });
    expect(loaded).toMatchObject({ ok: true, config: { cache: { store: 'redis', redis: { url: 'rediss://:hunter2@cache.internal:6380/2', key_prefix: 'compactor:', timeout_ms: 50 } } } });
    if (!loaded.ok) return;
    const printed = printableConfig(loaded.config);
    expect(printed).not.toContain('hunter2');
    expect((parseDocument(printed).toJS() as ReturnType<typeof defaultConfig>).cache.redis.url).toBe('rediss://:***@cache.internal:6380/2');
    expect(loadConfig({ env: { COMPACTOR_CACHE_STORE: 'redis' } })).toEqual({ ok: false, errors: ['cache.redis.url: required when cache.store is redis'] });
    expect(loadConfig({ env: { COMPACTOR_CACHE_STORE: 'redis', COMPACTOR_REDIS_URL: 'http://cache:6379' } })).toMatchObject({ ok: false, errors: [expect.stringMatching(/^cache\.redis\.url: expected a redis:\/\/ or rediss:\/\/ URL/)] });
    expect(loadConfig({ env: { COMPACTOR_CACHE_STORE: 'disk' } })).toMatchObject({ ok: false, errors: [expect.stringMatching(/^cache\.store: expected one of memory, redis/)] });
  });

  it('cache.redis.cluster (issue 27): COMPACTOR_REDIS_CLUSTER, seed nodes as a list or comma-separated, passwords masked, a list needs cluster', () => {
    const loaded = loadConfig({ env: { COMPACTOR_CACHE_STORE: 'redis', COMPACTOR_REDIS_CLUSTER: 'on', COMPACTOR_REDIS_URL: 'redis://:pw@node-a:7000, redis://:pw@node-b:7001' } });
    expect(loaded).toMatchObject({ ok: true, config: { cache: { redis: { cluster: true, url: ['redis://:pw@node-a:7000', 'redis://:pw@node-b:7001'] } } } });
    if (!loaded.ok) return;
    expect(printableConfig(loaded.config)).toContain('redis://:***@node-b:7001');
    expect(loadConfig({ env: { COMPACTOR_CACHE_STORE: 'redis', COMPACTOR_REDIS_CLUSTER: 'on', COMPACTOR_REDIS_URL: 'redis://node-a:7000' } })).toMatchObject({ ok: true, config: { cache: { redis: { cluster: true, url: 'redis://node-a:7000' } } } });
    expect(loadConfig({ env: { COMPACTOR_CACHE_STORE: 'redis', COMPACTOR_REDIS_URL: 'redis://a:1,redis://b:2' } })).toMatchObject({ ok: false, errors: [expect.stringMatching(/^cache\.redis\.url: a list of seed nodes needs cache\.redis\.cluster: true/)] });
    expect(loadConfig({ env: { COMPACTOR_REDIS_CLUSTER: 'maybe' } })).toMatchObject({ ok: false, errors: [expect.stringMatching(/^cache\.redis\.cluster: expected true or false \(from COMPACTOR_REDIS_CLUSTER\)/)] });
    const prefixed = parseConfig({ cache: { store: 'redis', redis: { url: 'redis://a:1', cluster: true, key_prefix: 'app{1}:' } } });
    expect(prefixed).toMatchObject({ ok: false, errors: [expect.stringMatching(/^cache\.redis\.key_prefix: must not contain \{ or \}/)] });
  });

  it('upstream.slots is auto by default (issue 33): scheduled when the server reports two slots or more, left alone with one', () => {
    expect(defaultConfig().upstream.slots).toBe('auto');
    expect(loadConfig({ env: {} })).toMatchObject({ ok: true, config: { upstream: { slots: 'auto', slot_save: false } } });
    expect(loadConfig({ env: { COMPACTOR_SLOTS: 'off' } })).toMatchObject({ ok: true, config: { upstream: { slots: 'off' } } });
  });

  it('upstream.slots (issue 28): COMPACTOR_SLOTS auto turns it on, the save keys and their bounds', () => {
    expect(defaultConfig().upstream).toMatchObject({ slot_wait_ms: 5000, slot_save: false, slot_save_max_bytes: 10 * 1024 ** 3 });
    expect(loadConfig({ env: { COMPACTOR_SLOTS: 'auto', COMPACTOR_SLOT_SAVE: 'true' } })).toMatchObject({ ok: true, config: { upstream: { slots: 'auto', slot_save: true } } });
    expect(loadConfig({ env: { COMPACTOR_SLOTS: 'on' } })).toMatchObject({ ok: false, errors: [expect.stringMatching(/^upstream\.slots: expected one of auto, off/)] });
    expect(parseConfig({ upstream: { slot_save_max_bytes: 0 } })).toMatchObject({ ok: false, errors: [expect.stringMatching(/^upstream\.slot_save_max_bytes/)] });
  });

  it('an empty file is the defaults', () => {
    const loaded = loadConfig({ argv: ['--config', file('')] });
    expect(loaded.ok && loaded.config).toEqual(defaultConfig());
  });
});

describe('an upstream URL that ends in /v1', () => {
  it('is forwarded to without it, and said so: clients\' paths already start with /v1', () => {
    const loaded = loadConfig({ env: { COMPACTOR_UPSTREAM_URL: 'http://127.0.0.1:8080/v1', COMPACTOR_SUMMARY_UPSTREAM: 'http://gpu:9000/llama/v1/' } });
    expect(loaded.ok).toBe(true);
    if (!loaded.ok) return;
    expect(loaded.config.upstream.url).toBe('http://127.0.0.1:8080');
    expect(loaded.config.compaction.summary.upstream).toBe('http://gpu:9000/llama');
    expect(loaded.notices).toEqual([
      'upstream.url ends in /v1, but clients\' paths already start with /v1: forwarding to http://127.0.0.1:8080 instead (write it so to silence this)',
      'compaction.summary.upstream ends in /v1, but clients\' paths already start with /v1: forwarding to http://gpu:9000/llama instead (write it so to silence this)',
    ]);
  });

  it('leaves other base paths alone, and masks a password in what it says', () => {
    const other = loadConfig({ env: { COMPACTOR_UPSTREAM_URL: 'http://127.0.0.1:8080/v1beta' } });
    expect(other.ok && other.config.upstream.url).toBe('http://127.0.0.1:8080/v1beta');
    expect(other.ok && other.notices).toEqual([]);
    const secret = loadConfig({ env: { COMPACTOR_UPSTREAM_URL: 'http://user:hunter2@127.0.0.1:8080/v1' } });
    expect(secret.ok && secret.notices.join('')).not.toContain('hunter2');
  });
});

describe('main', () => {
  it('exits with code 2 and lists the errors when the config is invalid', async () => {
    const path = file('upstream:\n  url: nope\nlisten:\n  port: -1\n');
    const child = spawnOwned(process.execPath, ['--import', 'tsx', join(ROOT, 'src/main.ts'), '--config', path], {
      cwd: ROOT,
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(2);
    expect(stderr).toContain('upstream.url: expected a URL');
    expect(stderr).toContain('listen.port: expected a port number');
  });

  it('exits with code 2 naming the key when the summary prompt file cannot be read', async () => {
    const { code, stdout, stderr } = await runMain(['--summary-prompt-file', '/nonexistent/prompt.txt', '--print-config']);
    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr).toContain('compaction.summary.prompt_file: cannot read /nonexistent/prompt.txt (ENOENT)');
  });

  it('--version prints the version of package.json and exits 0', async () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const { code, stdout } = await runMain(['--version']);
    expect(code).toBe(0);
    expect(stdout).toBe(`compactor ${version}\n`);
  });

  it('exits with code 2 naming an unknown COMPACTOR_* variable and the one it resembles', async () => {
    const { code, stderr } = await runMain(['--print-config'], { COMPACTOR_UPSTREAM: 'http://127.0.0.1:9' });
    expect(code).toBe(2);
    expect(stderr).toContain('COMPACTOR_UPSTREAM: unknown environment variable (did you mean COMPACTOR_UPSTREAM_URL?)');
  });

  it('--print-config prints the configuration in force and exits 0', async () => {
    const prompt = file('You write terse notes.');
    const { code, stdout } = await runMain(['--print-config', '--port', '9999', '--summary-prompt-file', prompt], { COMPACTOR_AUTH_KEYS: 'sk-secret' });
    expect(code).toBe(0);
    expect(stdout).toContain('port: 9999');
    expect(stdout).toContain(`prompt_file: ${prompt}`);
    expect(stdout).not.toContain('sk-secret');
  });

  async function runMain(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const child = spawnOwned(process.execPath, ['--import', 'tsx', join(ROOT, 'src/main.ts'), ...args], {
      cwd: ROOT,
      env: { ...process.env, COMPACTOR_CONFIG: '', ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    return { code, stdout, stderr };
  }

  function file(text: string): string {
    const directory = mkdtempSync(join(tmpdir(), 'compactor-main-'));
    const path = join(directory, 'config.yaml');
    writeFileSync(path, text);
    return path;
  }
});
