import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

/**
 * A bench server started on one CPU (taskset), its port reported over IPC, and its CPU time read
 * from /proc: shared by the benches that compare builds side by side (side-by-side.ts, revisions.ts).
 * Every child is put in `children`, for the bench to kill on exit.
 */
export async function startPinned(children: ChildProcess[], cpu: string, script: string, args: string[], nodeFlags: readonly string[] = [], env: NodeJS.ProcessEnv = {}): Promise<{ child: ChildProcess; origin: string }> {
  const child = spawn('taskset', ['-c', cpu, process.execPath, ...nodeFlags, script, ...args], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], env: { ...process.env, ...env } });
  children.push(child);
  const port = await new Promise<number>((resolvePort, reject) => {
    child.once('exit', (code) => reject(new Error(`${script} exited (${code})`)));
    child.on('message', (message: { port?: number }) => {
      if (typeof message.port === 'number') resolvePort(message.port);
    });
  });
  return { child, origin: `http://127.0.0.1:${port}` };
}

/** User + system CPU of a process, in microseconds: utime and stime, fields 14 and 15 of /proc/PID/stat (12 and 13 after "pid (comm) "). */
export function cpuMicros(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1_000_000) / 100;
}
