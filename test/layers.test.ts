import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The layers of src/ (DESIGN.md § Layout): the transcript core is pure and
 * imports nothing outside itself (zod for its loose schemas excepted);
 * upstream/ and compaction/ never import http/; formats/ imports only the
 * transcript, the errors, the media type and the shapes of an answer. errors.ts sits below them all.
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

  it('formats/ imports only itself, the transcript, the errors and their words, the media type, and the shapes of an answer', () => {
    // The media type is read to answer 415 in the format's words. Each format describes its answers in the shapes
    // the SSE tap and the usage reader take (StreamEnd, UsageWords, Usage): they import nothing of the project but each other.
    const allowed = new Set(['src/errors.ts', 'src/issue-words.ts', 'src/upstream/media-type.ts', 'src/upstream/sse.ts', 'src/upstream/usage.ts', 'zod']);
    expect(violations('formats', (target) => inLayer(target, 'formats') || inLayer(target, 'transcript') || allowed.has(target))).toEqual([]);
  });

  it('errors.ts imports nothing of the project but answer-reservation.ts, which imports nothing', () => {
    expect(violations('errors', (target) => !target.startsWith('src/') || target === 'src/answer-reservation.ts')).toEqual([]);
    expect(violations('answer-reservation', (target) => !target.startsWith('src/'))).toEqual([]);
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

/** A `src/…` path of a file. */
function pathOf(file: string): string {
  return `src/${relative(SRC, file).split(sep).join('/')}`;
}

/** The project modules each file of src/ imports. */
function projectGraph(): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>();
  for (const file of sourceFiles(SRC)) {
    const targets = new Set(importsOf(file, readFileSync(file, 'utf8')).map((entry) => entry.target).filter((target) => target.startsWith('src/')));
    graph.set(pathOf(file), targets);
  }
  return graph;
}

/** Each import circle of a graph, as the files on it, found by a depth-first walk that reports the path back to a file still open. */
export function importCircles(graph: ReadonlyMap<string, ReadonlySet<string>>): string[][] {
  const circles = new Map<string, string[]>();
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const walk = (file: string): void => {
    state.set(file, 'open');
    path.push(file);
    for (const target of graph.get(file) ?? []) {
      if (state.get(target) === 'open') {
        const circle = path.slice(path.indexOf(target)).sort();
        circles.set(circle.join(' '), circle);
      } else if (state.get(target) === undefined) walk(target);
    }
    path.pop();
    state.set(file, 'done');
  };
  for (const file of [...graph.keys()].sort()) if (state.get(file) === undefined) walk(file);
  return [...circles.values()];
}

/**
 * The order of src/, bottom first: a file imports only files of its own rank
 * or below. Inside compaction/ the rooms are ordered too: the shared types,
 * then the ports, then the pure policy, then the epochs and the summaries,
 * then the engine (the files directly in compaction/).
 */
const RANKS: ReadonlyArray<readonly [rank: number, test: (path: string) => boolean]> = [
  [0, (path) => path === 'src/errors.ts' || path === 'src/answer-reservation.ts' || path === 'src/issue-words.ts'],
  [1, (path) => inLayer(path, 'transcript')],
  [2, (path) => inLayer(path, 'config')],
  [3, (path) => inLayer(path, 'upstream') || inLayer(path, 'formats')],
  [4, (path) => path === 'src/compaction/types.ts'],
  [5, (path) => path === 'src/compaction/ports.ts'],
  [6, (path) => inLayer(path, 'compaction/policy')],
  [7, (path) => inLayer(path, 'compaction/epochs') || inLayer(path, 'compaction/summary')],
  // slots/ (issue 28) sits beside the engine: it names conversations by the epochs' prefix hash and wraps the summary call.
  // fleet/ (issue 39) beside them: one upstream client and one slot router per server, and the summary call per server.
  [8, (path) => inLayer(path, 'compaction') || inLayer(path, 'slots') || inLayer(path, 'fleet')],
  // doctor/ is an edge like http/: it reads the configuration, asks the upstream and the store, imports no http/.
  [9, (path) => inLayer(path, 'http') || inLayer(path, 'dashboard') || inLayer(path, 'doctor')],
  [10, (path) => path === 'src/app.ts' || path === 'src/main.ts'],
];

function rankOf(path: string): number | undefined {
  return RANKS.find(([, test]) => test(path))?.[0];
}

describe('the rooms of src/', () => {
  it('no import circle anywhere in src/', () => {
    const circles = importCircles(projectGraph());
    expect(circles.map((circle) => circle.join(' -> '))).toEqual([]);
  });

  it('every file of src/ has a rank, and no file imports one of a higher rank', () => {
    const graph = projectGraph();
    expect([...graph.keys()].filter((path) => rankOf(path) === undefined)).toEqual([]);
    const upward = [...graph].flatMap(([from, targets]) =>
      [...targets].filter((target) => (rankOf(target) ?? -1) > rankOf(from)!).map((target) => `${from} (rank ${rankOf(from)}) imports ${target} (rank ${rankOf(target)})`),
    );
    expect(upward).toEqual([]);
  });

  it('compaction/types.ts imports only the transcript (and zod, as the transcript does, for the one Epoch schema), and compaction/policy/ nothing that does I/O', () => {
    expect(violations('compaction/types', (target) => inLayer(target, 'transcript') || target === 'zod')).toEqual([]);
    const pure = (target: string): boolean =>
      inLayer(target, 'compaction/policy') || inLayer(target, 'transcript') || ['src/compaction/types.ts', 'src/errors.ts', 'src/config/schema.ts'].includes(target);
    expect(violations('compaction/policy', pure)).toEqual([]);
  });

  it('a ProxyError is made in errors.ts only, so its table is the whole list', () => {
    const makers = sourceFiles(SRC)
      .filter((file) => pathOf(file) !== 'src/errors.ts' && /new ProxyError\(/.test(readFileSync(file, 'utf8')))
      .map(pathOf);
    expect(makers).toEqual([]);
  });

  it('sees a circle, an upward import and a ProxyError made elsewhere when there is one', () => {
    const graph = new Map([
      ['a', new Set(['b'])],
      ['b', new Set(['c'])],
      ['c', new Set(['a'])],
      ['d', new Set(['a'])],
    ]);
    expect(importCircles(graph)).toEqual([['a', 'b', 'c']]);
    expect(importCircles(new Map([['a', new Set(['b'])], ['b', new Set<string>()]]))).toEqual([]);
    expect(rankOf('src/compaction/policy/plan.ts')! < rankOf('src/compaction/epochs/epoch-store.ts')!).toBe(true);
    expect(rankOf('src/compaction/types.ts')! < rankOf('src/compaction/ports.ts')!).toBe(true);
    expect(/new ProxyError\(/.test("return new ProxyError({ status: 431 });")).toBe(true);
  });
});
