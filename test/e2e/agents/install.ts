import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The agent CLIs (Codex, opencode, Qwen Code: about 900 MB) are no dependency
 * of compactor's own package, so `npm ci && npm start` stays light. They have
 * their own package.json and lock beside this file; this global setup of the
 * agents project (vitest.config.ts) installs them with `npm ci` before the
 * first agent test, and only then: vitest calls a project's global setup only
 * when that project has a test queued. An install whose lock has not changed
 * for the same Node is kept (its hash is stamped inside node_modules), so a second run costs nothing.
 */

export const AGENTS_DIRECTORY = dirname(fileURLToPath(import.meta.url));

/** Where the hash of the installed lock is written, inside what `npm ci` replaces. */
export const STAMP = join('node_modules', '.compactor-lock-hash');

export type InstallOutcome = 'installed' | 'cached';

/**
 * The hash of what `npm ci` installs from: the manifest (its allowScripts too), the lock, and the
 * Node it installs for (its module ABI and platform), so a run on another Node gets a clean install.
 */
export function lockHash(directory: string): string {
  const hash = createHash('sha256');
  hash.update(`${process.platform}-${process.arch}-node-abi-${process.versions.modules}\n`);
  for (const file of ['package.json', 'package-lock.json']) hash.update(readFileSync(join(directory, file)));
  return hash.digest('hex');
}

/** `npm ci` in `directory` unless what is there was installed from the same lock. */
export function ensureInstalled(directory: string, log: (line: string) => void = () => {}): InstallOutcome {
  const wanted = lockHash(directory);
  const stamp = join(directory, STAMP);
  if (existsSync(stamp) && readFileSync(stamp, 'utf8').trim() === wanted) return 'cached';
  log(`installing the agent CLIs (${directory}): npm ci, once per change of its lock`);
  // --loglevel=error: Qwen Code declares node >= 22 and runs on 20; that warning is not this suite's to show on every run.
  const result = spawnSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: directory, stdio: ['ignore', 'inherit', 'inherit'] });
  if (result.error !== undefined) throw new Error(`could not run npm ci for the agent CLIs: ${result.error.message}`);
  if (result.status !== 0) throw new Error(`npm ci for the agent CLIs (${directory}) exited ${result.status}`);
  mkdirSync(dirname(stamp), { recursive: true });
  writeFileSync(stamp, `${wanted}\n`);
  return 'installed';
}

/** vitest global setup of the agents project. */
export default function setup(): void {
  const outcome = ensureInstalled(AGENTS_DIRECTORY, (line) => process.stderr.write(`${line}\n`));
  if (outcome === 'cached') process.stderr.write('agent CLIs: installed from the current lock, kept\n');
}
