import type { ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnOwned } from './child-processes.js';

/** compactor's real command line (`src/main.ts`) as a child process, for what only a process can show: its exit, its output. */

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');

export interface MainProcess {
  readonly child: ChildProcess;
  /** `http://127.0.0.1:PORT` once it listens; rejects when it exits first. */
  readonly url: Promise<string>;
  /** Everything written to stdout and stderr so far. */
  output(): string;
  /** The exit code (null when ended by a signal). */
  readonly exit: Promise<number | null>;
}

export interface MainOptions {
  /** The process's open-file limit (`ulimit -n`, soft and hard: Node cannot raise it). */
  readonly openFiles?: number;
}

export function startMain(args: string[], env: Record<string, string>, options: MainOptions = {}): MainProcess {
  const command = [process.execPath, '--import', 'tsx', join(ROOT, 'src/main.ts'), ...args];
  const spawned: [string, string[]] =
    options.openFiles === undefined ? [command[0]!, command.slice(1)] : ['bash', ['-c', `ulimit -n ${options.openFiles} && exec "$@"`, 'bash', ...command]];
  // Ended when the test file ends, also when a test fails before stopping it (exec: the child is node itself).
  const child = spawnOwned(spawned[0], spawned[1], {
    cwd: ROOT,
    env: { ...process.env, ...env },
  });
  let output = '';
  const url = new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
      if (match?.[1] !== undefined) resolve(match[1]);
    });
    child.once('exit', () => reject(new Error(`exited before listening:\n${output}`)));
  });
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exit = new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { child, url, output: () => output, exit };
}
