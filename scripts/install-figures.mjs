#!/usr/bin/env node
/**
 * The README's install figures, measured as a new user meets them: a fresh
 * clone of the committed tree, `npm ci` (packages, MB, warnings), the time
 * from `npm start` to "compactor listening", and the production install
 * (`npm ci --omit=dev`). Writes scripts/install-figures.json, which
 * test/ship/install-figures.test.ts holds the README and package.json to.
 *
 *   node scripts/install-figures.mjs        (needs the npm registry; about a minute or two)
 *
 * MB are 10^6 bytes of the files' apparent sizes (`du -sb`), so a file
 * system's block size does not change them. Plain JavaScript: it runs
 * before anything is built.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { lstatSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const OUTPUT = join(ROOT, 'scripts', 'install-figures.json');
const STARTS = 5;

/** Bytes of every file under `path` (symbolic links as themselves). */
function bytesUnder(path) {
  const stat = lstatSync(path);
  if (!stat.isDirectory()) return stat.size;
  let total = 0;
  for (const entry of readdirSync(path)) total += bytesUnder(join(path, entry));
  return total;
}

/** The packages npm installed: the entries of its own record of the tree. */
function installedPackages(directory) {
  const record = JSON.parse(readFileSync(join(directory, 'node_modules', '.package-lock.json'), 'utf8'));
  return Object.keys(record.packages).filter((path) => path !== '').length;
}

/** A clean `npm ci` (with `extra` flags): what it installed, and the warnings it printed. */
function npmCi(directory, extra) {
  rmSync(join(directory, 'node_modules'), { recursive: true, force: true });
  const started = Date.now();
  const result = spawnSync('npm', ['ci', '--no-audit', '--no-fund', ...extra], { cwd: directory, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`npm ci ${extra.join(' ')} exited ${result.status}:\n${result.stderr}`);
  const warnings = `${result.stdout}\n${result.stderr}`.split('\n').filter((line) => /^npm warn/i.test(line));
  return {
    seconds: Math.round((Date.now() - started) / 1000),
    packages: installedPackages(directory),
    mb: Math.round(bytesUnder(join(directory, 'node_modules')) / 1e6),
    warnings: warnings.length,
    warningLines: warnings,
  };
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Milliseconds from `npm start` to the "compactor listening" line. */
async function startMilliseconds(directory) {
  const port = await freePort();
  const started = process.hrtime.bigint();
  const child = spawn('npm', ['start', '--silent', '--', '--port', String(port), '--upstream', 'http://127.0.0.1:9'], {
    cwd: directory,
    env: { ...process.env, COMPACTOR_CONFIG: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  try {
    return await new Promise((resolve, reject) => {
      let output = '';
      const timer = setTimeout(() => reject(new Error(`no "compactor listening" within 60 s:\n${output}`)), 60_000);
      child.stdout.on('data', (chunk) => {
        output += chunk;
        if (output.includes('compactor listening')) {
          clearTimeout(timer);
          resolve(Number(process.hrtime.bigint() - started) / 1e6);
        }
      });
      child.stderr.on('data', (chunk) => (output += chunk));
      child.once('exit', (code) => reject(new Error(`npm start exited ${code}:\n${output}`)));
    });
  } finally {
    // npm and the node it started: the whole group.
    process.kill(-child.pid, 'SIGKILL');
  }
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
const work = mkdtempSync(join(tmpdir(), 'compactor-install-figures-'));
try {
  const clone = join(work, 'clone');
  execFileSync('git', ['clone', '--quiet', ROOT, clone]);
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: clone, encoding: 'utf8' }).trim();
  process.stderr.write(`measuring a fresh clone of ${commit} (committed files only)\n`);

  const production = npmCi(clone, ['--omit=dev']);
  const full = npmCi(clone, []);
  const starts = [];
  for (let run = 0; run < STARTS; run++) starts.push(await startMilliseconds(clone));

  const figures = {
    measured: { commit, node: process.version, npm: execFileSync('npm', ['--version'], { encoding: 'utf8' }).trim(), platform: process.platform, arch: process.arch },
    // What the figures are of: test/ship/install-figures.test.ts compares it with package.json and its lock.
    dependencies: manifest.dependencies,
    devDependencies: manifest.devDependencies,
    lock: createHash('sha256').update(readFileSync(join(clone, 'package-lock.json'))).digest('hex'),
    install: { packages: full.packages, mb: full.mb, warnings: full.warnings, seconds: full.seconds },
    production: { packages: production.packages, mb: production.mb, warnings: production.warnings },
    start: { runs: STARTS, median_ms: Math.round(median(starts)), all_ms: starts.map((ms) => Math.round(ms)) },
  };
  writeFileSync(OUTPUT, `${JSON.stringify(figures, null, 2)}\n`);
  for (const line of [...full.warningLines, ...production.warningLines]) process.stderr.write(`${line}\n`);
  process.stdout.write(
    `npm ci: ${full.packages} packages, ${full.mb} MB, ${full.warnings} warning(s), ${full.seconds} s\n` +
      `npm ci --omit=dev: ${production.packages} packages, ${production.mb} MB\n` +
      `npm start to listening: ${figures.start.median_ms} ms (median of ${STARTS})\n` +
      `written to ${OUTPUT.slice(ROOT.length + 1)}\n`,
  );
} finally {
  rmSync(work, { recursive: true, force: true });
}
