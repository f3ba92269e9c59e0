#!/usr/bin/env node
/**
 * The package.json `npm pack` ships, without `prepare`: in a clone, `npm ci`
 * builds dist/ through it; in the tarball dist/ is built already, and an
 * install of it must not run a build script (`prepare` of a packed package
 * ran on install, issue 37).
 *
 *   node scripts/pack-manifest.mjs strip     `prepack`: package.json without scripts.prepare (the original kept aside)
 *   node scripts/pack-manifest.mjs restore   `postpack`: the original back, its time too (build.mjs --if-stale reads it)
 *
 * Plain JavaScript: it runs in a clone before anything is built.
 */
import { existsSync, readFileSync, renameSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const MANIFEST = join(ROOT, 'package.json');
const KEPT = join(ROOT, '.package.json.unpacked');

const [command] = process.argv.slice(2);
if (command === 'strip') {
  const text = readFileSync(MANIFEST, 'utf8');
  writeFileSync(KEPT, text);
  const { atime, mtime } = statSync(MANIFEST);
  utimesSync(KEPT, atime, mtime);
  const manifest = JSON.parse(text);
  delete manifest.scripts.prepare;
  writeFileSync(MANIFEST, `${JSON.stringify(manifest, null, 2)}\n`);
} else if (command === 'restore') {
  if (existsSync(KEPT)) {
    const { atime, mtime } = statSync(KEPT);
    renameSync(KEPT, MANIFEST);
    utimesSync(MANIFEST, atime, mtime);
  }
} else {
  console.error('usage: node scripts/pack-manifest.mjs strip | restore');
  process.exit(2);
}
