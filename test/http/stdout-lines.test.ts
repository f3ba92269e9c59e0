import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { Socket } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../src/http/ops/logger.js';
import { stdoutLines } from '../../src/http/ops/stdout-lines.js';
import { spawnOwned } from '../support/child-processes.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');

/** The numbers `i` of the JSON lines in `text`, in their order; a line that is not whole JSON is -1. */
function lineNumbers(text: string): number[] {
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => {
      try {
        return (JSON.parse(line) as { i: number }).i;
      } catch {
        return -1;
      }
    });
}

const upTo = (count: number): number[] => Array.from({ length: count }, (_, index) => index);

/**
 * compactor's logger in a child process writing `count` lines to its stdout (a pipe) and then calling
 * `process.exit` at once, before any write of the lines could go out on the event loop.
 */
async function linesOfAnExitingProcess(count: number): Promise<string> {
  const script = [
    `const { createLogger } = await import(${JSON.stringify(join(ROOT, 'src/http/ops/logger.ts'))});`,
    `const log = createLogger({ level: 'info' });`,
    `for (let i = 0; i < ${count}; i++) log.info({ i, pad: 'x'.repeat(200) }, 'line');`,
    `process.exit(0);`,
  ].join('\n');
  const child = spawnOwned(process.execPath, ['--import', 'tsx', '--input-type=module', '--eval', script], { cwd: ROOT });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  let errors = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (errors += chunk));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  expect(errors).toBe('');
  expect(code).toBe(0);
  return output;
}

describe('stdoutLines', () => {
  it('writes the lines still gathered when the process exits: fewer than one batch, none written before', async () => {
    expect(lineNumbers(await linesOfAnExitingProcess(3))).toEqual(upTo(3));
  });

  it('writes every line, in order, when the process exits with batches already under way and more gathered', async () => {
    expect(lineNumbers(await linesOfAnExitingProcess(5_000))).toEqual(upTo(5_000));
  });

  describe('to a pipe that fills (partial writes, EAGAIN)', () => {
    const folder = mkdtempSync(join(tmpdir(), 'compactor-stdout-lines-'));
    afterEach(() => {
      vi.restoreAllMocks();
      rmSync(folder, { recursive: true, force: true });
    });

    it('writes every byte of every line, in order, across partial writes and refused ones', async () => {
      // A FIFO opened without blocking: a write to it takes what fits (a partial write) or nothing (EAGAIN).
      const path = join(folder, 'fifo');
      execFileSync('mkfifo', [path]);
      const readFd = fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
      const writeFd = fs.openSync(path, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK);
      // What each asynchronous write did, seen through node:fs as the destination calls it.
      const write = fs.write;
      let partial = 0;
      let refused = 0;
      let filled!: () => void;
      const pipeFilled = new Promise<void>((resolve) => (filled = resolve));
      vi.spyOn(fs, 'write').mockImplementation(((fd: number, buffer: Buffer, callback: (error: NodeJS.ErrnoException | null, written: number) => void) =>
        write(fd, buffer, (error, written) => {
          if (error?.code === 'EAGAIN') refused += 1;
          else if (error === null && written < buffer.length) partial += 1;
          if (partial + refused > 0) filled();
          callback(error, written);
        })) as unknown as typeof fs.write);

      const count = 2_000;
      const lines = stdoutLines(writeFd);
      const logger = createLogger({ level: 'info', stream: lines });
      for (let i = 0; i < count; i++) logger.info({ i, pad: 'é'.repeat(150) }, 'line');
      // Nothing reads until the pipe (64 KiB) refused some of ~600 KB of lines.
      await pipeFilled;
      const reader = new Socket({ fd: readFd, readable: true, writable: false });
      let text = '';
      reader.setEncoding('utf8');
      await new Promise<void>((resolve) =>
        reader.on('data', (chunk: string) => {
          text += chunk;
          // Until the last line came whole (a line lost on the way fails the comparison below, not a timeout).
          if (text.endsWith('\n') && text.includes(`"i":${count - 1},`)) resolve();
        }),
      );
      reader.destroy();
      expect(partial + refused).toBeGreaterThan(0);
      expect(lineNumbers(text)).toEqual(upTo(count));
      expect(text).toContain('é'.repeat(150));
    });
  });
});
