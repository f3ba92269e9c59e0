import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { basename, join } from 'node:path';

/**
 * Compiles the working tree (`null`) or a git revision of the checkout at
 * `root` with bench/servers/tsconfig.json, the way the benches run compactor
 * (plain JavaScript on node alone); returns the build's directory. A
 * revision is checked out in a temporary worktree and compiled beside the
 * working tree's build (node_modules/.cache/compactor-REV). Shared by the
 * benches that compare two builds in one run (side-by-side.ts, idle-streams.ts).
 */
export function buildRevision(root: string, revision: string | null): string {
  if (revision === null) {
    // One directory per checkout: worktrees may share one node_modules (a symlink), and a build must not land on another's.
    const out = join(root, `node_modules/.cache/compactor-bench-${basename(root)}`);
    execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'bench/servers/tsconfig.json', '--outDir', out], { cwd: root, stdio: 'inherit' });
    return out;
  }
  const commit = execFileSync('git', ['rev-parse', '--short', revision], { cwd: root, encoding: 'utf8' }).trim();
  const out = join(root, `node_modules/.cache/compactor-${commit}`);
  // Inside this tree's node_modules/.cache, so the checkout finds the same dependencies and types (a fresh install has no .cache yet).
  mkdirSync(join(root, 'node_modules/.cache'), { recursive: true });
  const tree = mkdtempSync(join(root, 'node_modules/.cache/worktree-'));
  try {
    execFileSync('git', ['worktree', 'add', '--detach', tree, commit], { cwd: root, stdio: 'ignore' });
    // The revision's tsconfig names its types by paths inside its own tree (typeRoots: node_modules/@types):
    // give the checkout this tree's dependencies under that name, or tsc finds no type definitions for node.
    symlinkSync(join(root, 'node_modules'), join(tree, 'node_modules'), 'dir');
    if (existsSync(join(root, 'bench/node_modules'))) symlinkSync(join(root, 'bench/node_modules'), join(tree, 'bench/node_modules'), 'dir');
    execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', join(tree, 'bench/servers/tsconfig.json'), '--outDir', out], { cwd: root, stdio: 'inherit' });
  } finally {
    execFileSync('git', ['worktree', 'remove', '--force', tree], { cwd: root, stdio: 'ignore' });
    rmSync(tree, { recursive: true, force: true });
  }
  return out;
}
