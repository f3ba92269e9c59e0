import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * DESIGN.md § Layout names every file of src/ and only those: a file added,
 * moved or removed without the tree following fails here
 * (`node scripts/layout.mjs` prints the tree of today's src/).
 */

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

function sourceFiles(directory: string): string[] {
  return readdirSync(directory).flatMap((entry) => {
    const path = join(directory, entry);
    return statSync(path).isDirectory() ? sourceFiles(path) : path.endsWith('.ts') ? [relative(ROOT, path).split(sep).join('/')] : [];
  });
}

/** The files the `src/` tree of § Layout names: two spaces of indent per folder, the first word of a line its name. */
export function layoutFiles(design: string): string[] {
  const section = design.slice(Math.max(0, design.search(/(?:^|\n)## Layout\n/)));
  const block = /```\n([\s\S]*?)```/.exec(section)?.[1] ?? '';
  const files: string[] = [];
  const folders: string[] = [];
  let inSrc = false;
  for (const line of block.split('\n')) {
    const name = /^(\s*)(\S+)/.exec(line);
    if (name === null) continue;
    const depth = name[1]!.length / 2;
    if (depth === 0) inSrc = name[2] === 'src/';
    if (!inSrc) continue;
    folders.length = depth;
    if (name[2]!.endsWith('/')) folders[depth] = name[2]!.slice(0, -1);
    else if (name[2]!.endsWith('.ts')) files.push([...folders, name[2]!].join('/'));
  }
  return files.sort();
}

describe('DESIGN.md § Layout', () => {
  it('names exactly the files of src/', () => {
    const named = layoutFiles(readFileSync(join(ROOT, 'DESIGN.md'), 'utf8'));
    const present = sourceFiles(join(ROOT, 'src')).sort();
    expect({ missingFromLayout: present.filter((file) => !named.includes(file)), notInTree: named.filter((file) => !present.includes(file)) }).toEqual({
      missingFromLayout: [],
      notInTree: [],
    });
  });

  it('reads a tree as it is written, so a file left out or made up would be seen', () => {
    const design = '## Layout\n\n```\nsrc/\n  app.ts            wiring\n  http/\n    routes/\n      chat.ts       the route\n    auth.ts         keys\ntest/\n  x.ts\n```\n';
    expect(layoutFiles(design)).toEqual(['src/app.ts', 'src/http/auth.ts', 'src/http/routes/chat.ts']);
  });
});
