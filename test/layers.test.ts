import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The layers of src/ (DESIGN.md § Layout): the transcript core is pure and
 * imports nothing outside itself (zod for its loose schemas excepted);
 * upstream/ and compaction/ never import http/; formats/ imports only the
 * transcript, the errors and the media type. errors.ts sits below them all.
 */

const SRC = join(dirname(fileURLToPath(import.meta.url)), '../src');

interface Import {
  readonly file: string;
  /** `src/…` for a module of the project, else the package name. */
  readonly target: string;
}

function sourceFiles(directory: string): string[] {
  return readdirSync(directory).flatMap((entry) => {
    const path = join(directory, entry);
    return statSync(path).isDirectory() ? sourceFiles(path) : path.endsWith('.ts') ? [path] : [];
  });
}

/** Every static and dynamic import of a file, type-only ones too: a type import is a dependency of the design all the same. */
export function importsOf(file: string, text: string): Import[] {
  const specifiers = [...text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|(?:^|\n)\s*import\s+['"]([^'"]+)['"]/g)].map(
    (match) => match[1] ?? match[2] ?? match[3]!,
  );
  return specifiers.map((specifier) => {
    if (!specifier.startsWith('.')) return { file, target: specifier.startsWith('node:') ? specifier : specifier.split('/')[0]! };
    const path = resolve(dirname(file), specifier.replace(/\.js$/, '.ts'));
    return { file, target: `src/${relative(SRC, path).split(sep).join('/')}` };
  });
}

function inLayer(target: string, layer: string): boolean {
  return target === `src/${layer}.ts` || target.startsWith(`src/${layer}/`);
}

/** Imports of files in `layer` that break `allowed`. */
function violations(layer: string, allowed: (target: string) => boolean): string[] {
  return allImports()
    .filter((entry) => inLayer(`src/${relative(SRC, entry.file).split(sep).join('/')}`, layer))
    .filter((entry) => !allowed(entry.target))
    .map((entry) => `${relative(SRC, entry.file)} imports ${entry.target}`);
}

function allImports(): Import[] {
  return sourceFiles(SRC).flatMap((file) => importsOf(file, readFileSync(file, 'utf8')));
}

describe('the layers of src/', () => {
  it('transcript/ imports nothing outside itself but zod', () => {
    expect(violations('transcript', (target) => inLayer(target, 'transcript') || target === 'zod')).toEqual([]);
  });

  it('upstream/ and compaction/ never import http/', () => {
    const notHttp = (target: string): boolean => !inLayer(target, 'http');
    expect([...violations('upstream', notHttp), ...violations('compaction', notHttp)]).toEqual([]);
  });

  it('formats/ imports only itself, the transcript, the errors and their words, and the media type', () => {
    // The media type is read to answer 415 in the format's words; secure-json-parse parses every body.
    const allowed = new Set(['src/errors.ts', 'src/issue-words.ts', 'src/upstream/media-type.ts', 'zod', 'secure-json-parse']);
    expect(violations('formats', (target) => inLayer(target, 'formats') || inLayer(target, 'transcript') || allowed.has(target))).toEqual([]);
  });

  it('errors.ts imports nothing of the project', () => {
    expect(violations('errors', (target) => !target.startsWith('src/'))).toEqual([]);
  });

  it('reads imports as they are written, so a breach would be seen', () => {
    const file = join(SRC, 'compaction', 'x.ts');
    const text = "import type { A } from '../http/routes/chat.js';\nimport { b } from './plan.js';\nexport { c } from 'fastify';\nconst d = await import('../upstream/client.js');";
    expect(importsOf(file, text).map((entry) => entry.target)).toEqual(['src/http/routes/chat.ts', 'src/compaction/plan.ts', 'fastify', 'src/upstream/client.ts']);
  });
});
