import { type ChildProcess, type ChildProcessByStdio, type SpawnOptionsWithStdioTuple, type StdioNull, type StdioPipe, spawn } from 'node:child_process';
import type { Readable } from 'node:stream';
import { afterAll } from 'vitest';

/**
 * Processes a test starts (compactor's main.ts, curl, …), ended when their
 * test file ends, also when a test failed or timed out before its own
 * cleanup ran: no test leaves a process behind. Registered by
 * test/support/setup.ts for every file.
 */

const running = new Set<ChildProcess>();

type Options = Omit<SpawnOptionsWithStdioTuple<StdioNull, StdioPipe, StdioPipe>, 'stdio'>;

/**
 * `spawn` with no input and both outputs piped, the child ended at the end of
 * the test file if it is still running then.
 */
export function spawnOwned(command: string, args: readonly string[], options: Options = {}): ChildProcessByStdio<null, Readable, Readable> {
  const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  child.once('exit', () => running.delete(child));
  return child;
}

/** Ends every child still running (SIGKILL: a test's cleanup has no time for a graceful stop). */
export function endOwnedProcesses(): void {
  for (const child of running) child.kill('SIGKILL');
  running.clear();
}

/** The number of children still running; a test checks that none outlives its file. */
export function ownedProcessCount(): number {
  return running.size;
}

export function endOwnedProcessesAfterEachFile(): void {
  afterAll(endOwnedProcesses);
  // A worker that exits without running its hooks (a crash, a hard timeout) still ends them.
  process.once('exit', endOwnedProcesses);
}
