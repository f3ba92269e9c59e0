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

/** Files of src/ as `src/…` paths, with the project modules each imports. */
function importGraph(): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>();
  for (const file of sourceFiles(SRC)) {
    const from = `src/${relative(SRC, file).split(sep).join('/')}`;
    const targets = graph.get(from) ?? new Set<string>();
    for (const entry of importsOf(file, readFileSync(file, 'utf8'))) if (entry.target.startsWith('src/')) targets.add(entry.target);
    graph.set(from, targets);
  }
  return graph;
}

/** The import circles of a graph (its strongly connected components of more than one file, or a file importing itself), by Tarjan's algorithm. */
export function circlesOf(graph: ReadonlyMap<string, ReadonlySet<string>>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  let next = 0;
  const visit = (file: string): void => {
    index.set(file, next);
    low.set(file, next);
    next++;
    stack.push(file);
    onStack.add(file);
    for (const target of graph.get(file) ?? []) {
      if (!index.has(target)) {
        visit(target);
        low.set(file, Math.min(low.get(file)!, low.get(target)!));
      } else if (onStack.has(target)) low.set(file, Math.min(low.get(file)!, index.get(target)!));
    }
    if (low.get(file) !== index.get(file)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== file);
    if (component.length > 1 || graph.get(file)?.has(file) === true) circles.push(component.sort());
  };
  for (const file of graph.keys()) if (!index.has(file)) visit(file);
  return circles;
}

/** Imports that bring a value in (not `import type`), of one file's text. */
function valueImports(text: string): string[] {
  return [...text.matchAll(/(?:^|\n)\s*import\s+(?!type\b)[^'"]*?from\s+['"]([^'"]+)['"]/g)].map((match) => match[1]!);
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

  it('src/http/ and src/formats/ hold no import circle', () => {
    const circles = circlesOf(importGraph()).filter((circle) => circle.some((file) => inLayer(file, 'http') || inLayer(file, 'formats')));
    expect(circles.map((circle) => circle.join(' -> '))).toEqual([]);
  });

  it('outside src/formats/, a format is reached only through its registry', () => {
    const breaches = allImports()
      .filter((entry) => !inLayer(`src/${relative(SRC, entry.file).split(sep).join('/')}`, 'formats'))
      .filter((entry) => inLayer(entry.target, 'formats') && entry.target !== 'src/formats/registry.ts')
      .map((entry) => `${relative(SRC, entry.file)} imports ${entry.target}`);
    expect(breaches).toEqual([]);
  });

  it('routes/ only registers: no class, no function but a registration, no value from upstream/ or compaction/', () => {
    const routes = join(SRC, 'http', 'routes');
    const breaches = sourceFiles(routes).flatMap((file) => {
      const text = readFileSync(file, 'utf8');
      const name = relative(SRC, file);
      const classes = /(?:^|\n)\s*(?:export\s+)?class\s/.test(text) ? [`${name} defines a class`] : [];
      const functions = [...text.matchAll(/(?:^|\n)(?:export\s+)?(?:async\s+)?function\s+(\w+)/g)]
        .map((match) => match[1]!)
        .filter((function_) => !function_.endsWith('Routes') && function_ !== 'routeEveryMethod')
        .map((function_) => `${name} defines ${function_}`);
      const values = valueImports(text)
        .filter((specifier) => /^\.\.\/\.\.\/(?:upstream|compaction)\//.test(specifier))
        .map((specifier) => `${name} imports a value from ${specifier}`);
      return [...classes, ...functions, ...values];
    });
    expect(breaches).toEqual([]);
  });

  it('finds a circle when there is one, and none in a line', () => {
    const graph = new Map([
      ['a', new Set(['b'])],
      ['b', new Set(['c'])],
      ['c', new Set(['a'])],
      ['d', new Set(['a'])],
    ]);
    expect(circlesOf(graph)).toEqual([['a', 'b', 'c']]);
    expect(circlesOf(new Map([['a', new Set(['b'])], ['b', new Set<string>()]]))).toEqual([]);
  });

  it('reads imports as they are written, so a breach would be seen', () => {
    const file = join(SRC, 'compaction', 'x.ts');
    const text = "import type { A } from '../http/routes/chat.js';\nimport { b } from './plan.js';\nexport { c } from 'fastify';\nconst d = await import('../upstream/client.js');";
    expect(importsOf(file, text).map((entry) => entry.target)).toEqual(['src/http/routes/chat.ts', 'src/compaction/plan.ts', 'fastify', 'src/upstream/client.ts']);
  });
});
