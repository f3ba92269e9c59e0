#!/usr/bin/env node
/**
 * Builds dist/ from src/ with TypeScript, only when it has to, so `npm start`
 * starts in a fraction of a second instead of paying `tsc` (8–12 s) each time.
 *
 *   node scripts/build.mjs --if-possible   `prepare` (npm ci): build when TypeScript is installed
 *   node scripts/build.mjs --if-stale      `prestart`: build when a source is newer than dist/
 *
 * Plain JavaScript on purpose: it runs before anything is built, also after
 * `npm ci --omit=dev`, where neither tsx nor TypeScript is installed.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
// Written after each successful build: its time is the build's, whatever tsc left untouched.
const STAMP = join(ROOT, 'dist', '.built');
const INPUTS = ['src', 'tsconfig.json', 'tsconfig.build.json', 'package.json'];

function newestInput(path) {
  if (!existsSync(path)) return 0;
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = stat.mtimeMs;
  for (const entry of readdirSync(path)) newest = Math.max(newest, newestInput(join(path, entry)));
  return newest;
}

function typescriptCompiler() {
  try {
    return createRequire(join(ROOT, 'package.json')).resolve('typescript/bin/tsc');
  } catch {
    return null;
  }
}

function build(tsc) {
  const result = spawnSync(process.execPath, [tsc, '-p', join(ROOT, 'tsconfig.build.json')], { stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
  writeFileSync(STAMP, `${new Date().toISOString()}\n`);
}

const mode = process.argv[2];
const hasSources = existsSync(join(ROOT, 'src'));
const tsc = typescriptCompiler();

if (mode === '--if-possible') {
  // A published package ships dist/ and no src/; an install without dev dependencies cannot build.
  if (hasSources && tsc !== null) build(tsc);
} else if (mode === '--if-stale') {
  const built = existsSync(STAMP) ? statSync(STAMP).mtimeMs : 0;
  const stale = hasSources && INPUTS.some((input) => newestInput(join(ROOT, input)) > built);
  if (stale && tsc !== null) build(tsc);
  else if (!existsSync(join(ROOT, 'dist', 'main.js'))) {
    process.stderr.write(
      'compactor: dist/ is not built and TypeScript is not installed (an install with --omit=dev).\n' +
        'Build once with the dev dependencies (`npm ci`), or run the container image (see README.md).\n',
    );
    process.exit(1);
  } else if (stale) {
    process.stderr.write('compactor: src/ changed since dist/ was built, and TypeScript is not installed to rebuild it: starting the old build.\n');
  }
} else {
  process.stderr.write('usage: node scripts/build.mjs --if-possible | --if-stale\n');
  process.exit(2);
}
