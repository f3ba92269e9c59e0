import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

/** `npm run demo`, shortened: it runs to its table, every request answered, compactions printed as they happen. */

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');

describe('npm run demo', () => {
  it('drives a scripted agent through compactor and closes with its table', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', join(ROOT, 'scripts/demo.ts'), '--turns', '14', '--window', '8192'], {
      cwd: ROOT,
      timeout: 60_000,
    });
    expect(stdout).toMatch(/^turn 14 {2}requests 40-42 /m);
    expect(stdout).toMatch(/▸ compactor \(request \d+, [^)]+\): summarized \d+ messages -> 1 summary/);
    expect(stdout).toMatch(/^requests \(client -> compactor -> llama-server\)\s+42$/m);
    expect(stdout).toMatch(/^answered 200 \/ refused 400 by the upstream\s+42 \/ 0$/m);
    expect(stdout).toMatch(/^requests that reused an epoch \(no model call\)\s+[1-9]\d*$/m);
    expect(stdout).toMatch(/^upstream KV reuse \(cached \/ prompt tokens, summaries too\)\s+\d+%$/m);
    expect(stdout).toMatch(/^facts of turns 1-13 still in the last prompt\s+13 of 13$/m);
  });
});

/** The README's demo block: its turn lines and its closing table, as `npm run demo` prints them. */
function readmeDemoBlock(): { lines: string[]; table: string[] } {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const block = /```text\n(turn [\s\S]*?)```/.exec(readme)?.[1];
  if (block === undefined) throw new Error('README.md has no demo block');
  const [lines = '', table = ''] = block.split('\n\n');
  return { lines: lines.split('\n').filter((line) => line !== '…').map(withoutDuration), table: table.trimEnd().split('\n') };
}

function withoutDuration(line: string): string {
  return line.replace(/, \d+\.\ds\)/, ', …s)');
}

describe("the README's demo figures", () => {
  it('are what `npm run demo` prints, line for line', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', join(ROOT, 'scripts/demo.ts')], { cwd: ROOT, timeout: 120_000 });
    const { lines, table } = readmeDemoBlock();
    // A summary's duration is this machine's; every other figure is the script's.
    const printed = stdout.split('\n').map(withoutDuration);
    for (const line of lines) expect(printed).toContain(line);
    const start = printed.findIndex((line) => line.startsWith('requests (client'));
    expect(printed.slice(start, start + table.length)).toEqual(table);
  }, 130_000);
});
