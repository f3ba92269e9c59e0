import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeUpstream, replies } from '../support/fake-upstream.js';

/**
 * issue 23, item 6: the package `npm pack` makes installs globally with
 * `--omit=dev` on a clean prefix, and its `bin` runs `compactor --version`
 * and `compactor doctor`. The install resolves the production dependencies
 * from the registry (the npm cache first: `npm ci` filled it).
 */

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
const run = promisify(execFile);
const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string; dependencies: Record<string, string> };

let scratch: string;
let prefix: string;
let packed: string[];
let upstream: FakeUpstream;

beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'compactor-pack-'));
  prefix = join(scratch, 'prefix');
  // dist/ as the sources are now (what `prepare` would build), then the package of it.
  await run(process.execPath, [join(ROOT, 'scripts/build.mjs'), '--if-stale'], { cwd: ROOT });
  // Packed from a copy of what the package is made of, with its scripts: `prepack` ships the manifest without `prepare`
  // (scripts/pack-manifest.mjs), `postpack` puts it back. Not in the clone itself: other test files run beside this one,
  // and would see its package.json without `prepare` (and newer, so stale to build.mjs --if-stale) while npm packs.
  const source = join(scratch, 'source');
  // The sources and tests too, so `files` is what keeps them out (no TypeScript resolves from the copy: `prepare` builds nothing).
  const parts = ['package.json', 'README.md', 'LICENSE', 'config.example.yaml', 'dist', 'scripts', 'src', 'test', 'bench', 'docker'];
  const noModules = (path: string): boolean => !path.split(/[\\/]/).includes('node_modules');
  for (const path of parts) cpSync(join(ROOT, path), join(source, path), { recursive: true, filter: noModules });
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', scratch], { cwd: source, timeout: 240_000 });
  const [pack] = JSON.parse(stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
  packed = pack!.files.map((file) => file.path);
  await run('npm', ['install', '-g', join(scratch, pack!.filename), '--prefix', prefix, '--omit=dev', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd: scratch,
    timeout: 240_000,
  });
  upstream = await FakeUpstream.start();
  const withTools = replies.fixture('apply_template_tools');
  const withoutTools = replies.fixture('apply_template');
  upstream.route('POST', '/apply-template', (exchange) => ((exchange.request.json as { tools?: unknown }).tools === undefined ? withoutTools : withTools)(exchange));
}, 300_000);

afterAll(async () => {
  await upstream?.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('the packed package, installed globally without dev dependencies', () => {
  const env = (): NodeJS.ProcessEnv => ({ ...process.env, COMPACTOR_CONFIG: '', HOME: scratch });

  it('carries the build and what it reads, not the sources or the tests', () => {
    expect(packed).toContain('dist/main.js');
    expect(packed).toContain('dist/doctor/command.js');
    expect(packed).toContain('package.json');
    expect(packed.filter((path) => /^(src|test|bench|docker)\//.test(path))).toEqual([]);
  });

  it('issue 37: ships a manifest without `prepare`, so installing it runs no build; the clone keeps its own', () => {
    const installed = JSON.parse(readFileSync(join(prefix, 'lib/node_modules', manifest.name, 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
    expect(installed.scripts?.['prepare']).toBeUndefined();
    const clone = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(clone.scripts['prepare']).toBe('node scripts/build.mjs --if-possible');
  });

  it('installs the production dependencies only', () => {
    const installed = join(prefix, 'lib/node_modules', manifest.name);
    expect(existsSync(join(installed, 'node_modules', 'fastify'))).toBe(true);
    for (const devOnly of ['typescript', 'vitest', 'tsx']) expect(existsSync(join(installed, 'node_modules', devOnly)), devOnly).toBe(false);
  });

  it('`compactor --version` prints the version', async () => {
    const { stdout } = await run(join(prefix, 'bin/compactor'), ['--version'], { env: env() });
    expect(stdout).toBe(`compactor ${manifest.version}\n`);
  });

  it('`compactor doctor` checks a llama-server and says all is well', async () => {
    const { stdout } = await run(join(prefix, 'bin/compactor'), ['doctor', '--upstream', upstream.url], { env: env(), timeout: 60_000 });
    expect(stdout).toMatch(/^ok {3}upstream /m);
    expect(stdout.trimEnd().split('\n').at(-1)).toBe('all well');
  });

  it('`compactor doctor` exits 1 when the upstream is not there', async () => {
    const failed = await run(join(prefix, 'bin/compactor'), ['doctor', '--upstream', 'http://127.0.0.1:9'], { env: env(), timeout: 60_000 }).then(
      () => ({ code: 0, stdout: '' }),
      (error: { code: number; stdout: string }) => error,
    );
    expect(failed.code).toBe(1);
    expect(failed.stdout).toMatch(/^first thing to fix: start llama-server at http:\/\/127\.0\.0\.1:9/m);
  });
});
