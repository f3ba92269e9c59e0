import { execFile } from 'node:child_process';
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
