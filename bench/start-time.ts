/**
 * How long compactor takes from the command to listening, for the ways a
 * person starts it (issue 14): `npm start` as it is now (prestart checks the
 * build, nothing to rebuild), `node dist/main.js` alone, and the former
 * `npm start` (`npm run build && node dist/main.js`, tsc every time) as the
 * baseline, measured in the same run.
 *
 *   npx tsx bench/start-time.ts [--runs=5]
 *
 * Needs a built dist/ (npm ci builds it). Each run starts the process on a
 * free port with an unreachable upstream, waits for "Server listening", then
 * ends it.
 */
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const runs = Number(process.argv.find((argument) => argument.startsWith('--runs='))?.slice('--runs='.length) ?? 5);

const WAYS: ReadonlyArray<{ name: string; command: string; args: string[] }> = [
  { name: 'npm start (dist/ up to date)', command: 'npm', args: ['start', '--silent', '--', '--port', '0'] },
  { name: 'node dist/main.js', command: process.execPath, args: ['dist/main.js', '--port', '0'] },
  { name: 'before: npm run build && node dist/main.js', command: 'sh', args: ['-c', 'npm run build --silent && exec node dist/main.js --port 0'] },
];

function timeToListening(command: string, args: string[]): Promise<number> {
  const started = performance.now();
  // An upstream nobody listens on: the start does not depend on one.
  const child = spawn(command, args, { cwd: ROOT, env: { ...process.env, COMPACTOR_UPSTREAM_URL: 'http://127.0.0.1:9', COMPACTOR_CONFIG: '' }, detached: true });
  return new Promise((resolve, reject) => {
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Server listening')) {
        resolve(performance.now() - started);
        process.kill(-child.pid!, 'SIGKILL');
      }
    });
    child.once('exit', (code) => reject(new Error(`exited (${code}) before listening:\n${output}`)));
  });
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

const rows: string[] = [];
for (const way of WAYS) {
  const times: number[] = [];
  for (let run = 0; run < runs; run++) times.push(await timeToListening(way.command, way.args).catch((error: unknown) => Promise.reject(error)));
  rows.push(`| ${way.name} | ${(median(times) / 1000).toFixed(2)} s | ${(Math.min(...times) / 1000).toFixed(2)}–${(Math.max(...times) / 1000).toFixed(2)} s |`);
}
console.log(`Node ${process.version}, ${runs} runs each, command to "Server listening":\n`);
console.log('| how | median | range |\n|---|---|---|');
console.log(rows.join('\n'));
