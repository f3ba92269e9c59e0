import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { AGENTS_DIRECTORY, STAMP, ensureInstalled } from '../e2e/agents/install.js';

/**
 * issue 23, item 1: the agent CLIs live in their own package, installed by the
 * agent suite's global setup and kept while their lock is unchanged; the
 * project's own install carries none of them.
 */

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
const AGENT_CLIS = ['@openai/codex', '@qwen-code/qwen-code', 'opencode-ai'];

interface Lock {
  packages: Record<string, { version?: string; optional?: boolean; dev?: boolean; optionalDependencies?: Record<string, string> }>;
}

const json = <T>(path: string): T => JSON.parse(readFileSync(path, 'utf8')) as T;

describe('the agent CLIs, installed apart', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'compactor-agent-install-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  /** A package of no dependencies: npm ci installs it offline in a moment. */
  function writePackage(description: string): void {
    const manifest = { name: 'install-probe', version: '1.0.0', private: true, description };
    writeFileSync(join(scratch, 'package.json'), JSON.stringify(manifest));
    const lock = { name: 'install-probe', version: '1.0.0', lockfileVersion: 3, requires: true, packages: { '': { name: 'install-probe', version: '1.0.0' } } };
    writeFileSync(join(scratch, 'package-lock.json'), JSON.stringify(lock));
  }

  it('installs once, keeps the install while the lock is the same, installs again when it changes', () => {
    writePackage('first');
    expect(ensureInstalled(scratch)).toBe('installed');
    expect(existsSync(join(scratch, STAMP))).toBe(true);
    expect(ensureInstalled(scratch)).toBe('cached');
    writePackage('second');
    expect(ensureInstalled(scratch)).toBe('installed');
    expect(ensureInstalled(scratch)).toBe('cached');
  }, 60_000);

  it("are dependencies of the agents' package, and of the project's neither", () => {
    const project = json<{ dependencies: Record<string, string>; devDependencies: Record<string, string> }>(join(ROOT, 'package.json'));
    const agents = json<{ dependencies: Record<string, string> }>(join(AGENTS_DIRECTORY, 'package.json'));
    expect(Object.keys(agents.dependencies).sort()).toEqual(AGENT_CLIS);
    const rootLock = json<Lock>(join(ROOT, 'package-lock.json'));
    for (const name of AGENT_CLIS) {
      expect(project.devDependencies[name], name).toBeUndefined();
      expect(rootLock.packages[`node_modules/${name}`], name).toBeUndefined();
    }
  });

  it("has every platform's optional binary in its lock, so npm ci accepts it on any machine", () => {
    // The registry this project is built against serves linux packages only, and npm then leaves
    // the others out of a lock it writes; npm ci elsewhere refuses such a lock as out of sync.
    const lock = json<Lock>(join(AGENTS_DIRECTORY, 'package-lock.json'));
    const missing: string[] = [];
    for (const [path, entry] of Object.entries(lock.packages)) {
      for (const name of Object.keys(entry.optionalDependencies ?? {})) {
        const nested = `${path === '' ? '' : `${path}/`}node_modules/${name}`;
        if (lock.packages[nested] === undefined && lock.packages[`node_modules/${name}`] === undefined) missing.push(`${path} -> ${name}`);
      }
    }
    expect(missing).toEqual([]);
    expect(lock.packages['node_modules/opencode-darwin-arm64']).toMatchObject({ optional: true });
  });
});
