import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { endOwnedProcesses, ownedProcessCount, spawnOwned } from '../support/child-processes.js';

/**
 * A user's `git clone` has nothing beside it: no file of the project reads
 * outside its own tree (the recordings live in test/fixtures/), and a test
 * that starts a process ends it, also when the test fails.
 */

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
// The folder a team machine has beside the clone, named in pieces so this file does not name it itself.
const BESIDE = ['..', 'shared'].join('/');
const NAMES_BESIDE = new RegExp(`${BESIDE.replace(/\./g, '\\.')}\\b|/${BESIDE.slice(3)}/fixtures`);
const SCANNED = ['src', 'test', 'scripts', 'bench', 'docker', '.ci'];
const SKIPPED = new Set(['node_modules', 'fixtures', 'results']);

function filesUnder(directory: string): string[] {
  return readdirSync(directory).flatMap((entry) => {
    if (SKIPPED.has(entry)) return [];
    const path = join(directory, entry);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

/** Relative paths written in a file ('../x', "../../y"), each resolved from the file's folder. */
function relativePathsIn(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/['"`]((?:\.\.\/)+[^'"`\s]*)['"`]/g)].map((match) => resolve(dirname(file), match[1]!));
}

function outsideRoot(path: string): boolean {
  const fromRoot = relative(ROOT, path);
  return fromRoot.startsWith(`..${sep}`) || fromRoot === '..';
}

describe('the repository stands alone', () => {
  it('has the llama-server recordings and their README in test/fixtures/', () => {
    const readme = readFileSync(join(ROOT, 'test/fixtures/llama-server/README.md'), 'utf8');
    expect(readme).toContain('llama-server');
    expect(readdirSync(join(ROOT, 'test/fixtures/llama-server')).filter((name) => name.endsWith('.txt')).length).toBeGreaterThan(10);
  });

  it('no file names a path outside the tree', () => {
    const offenders: string[] = [];
    for (const directory of SCANNED) {
      // This file writes escaping paths on purpose, to check the scanner.
      for (const file of filesUnder(join(ROOT, directory)).filter((path) => path !== fileURLToPath(import.meta.url))) {
        const text = readFileSync(file, 'utf8');
        if (NAMES_BESIDE.test(text)) offenders.push(`${relative(ROOT, file)}: names ${BESIDE}`);
        for (const path of relativePathsIn(file)) if (outsideRoot(path)) offenders.push(`${relative(ROOT, file)}: ${relative(ROOT, path)}`);
      }
    }
    expect(offenders).toEqual([]);
  });

  it('the scanner sees an escaping path when there is one', () => {
    const file = join(ROOT, 'test/support/fixtures.ts');
    expect(outsideRoot(resolve(dirname(file), `../../${BESIDE}/fixtures`))).toBe(true);
    expect(NAMES_BESIDE.test(`join(here, '../../${BESIDE}/fixtures/llama-server')`)).toBe(true);
    expect(NAMES_BESIDE.test(`join(here, '../fixtures/llama-server')`)).toBe(false);
    expect(outsideRoot(resolve(dirname(file), '../fixtures/llama-server'))).toBe(false);
  });

  it('a process a test started is ended when its file ends, even if the test never stopped it', async () => {
    const child = spawnOwned(process.execPath, ['-e', 'setInterval(() => {}, 1000)']);
    await new Promise((resolve) => child.once('spawn', resolve));
    expect(ownedProcessCount()).toBeGreaterThan(0);
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, signal) => resolve(signal)));
    endOwnedProcesses();
    expect(await exited).toBe('SIGKILL');
    expect(ownedProcessCount()).toBe(0);
  });
});
