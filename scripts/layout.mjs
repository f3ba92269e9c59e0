// Prints a § Layout tree of src/ for DESIGN.md: every file, with the first
// sentence of its first doc comment. test/design-layout.test.ts checks that
// DESIGN.md's tree names exactly the files of src/; run this after adding,
// moving or removing one, and edit the words it prints as needed.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const WIDTH = 34;

function describe(file) {
  const text = readFileSync(file, 'utf8');
  const comment = /\/\*\*([\s\S]*?)\*\//.exec(text)?.[1] ?? '';
  const words = comment.split('\n').map((line) => line.replace(/^\s*\*\s?/, '').trim()).filter((line) => !line.startsWith('@')).join(' ').trim();
  const sentence = /^(.*?[.:;])(\s|$)/.exec(words)?.[1] ?? words;
  const label = sentence.replace(/[:;]$/, '');
  return label.length > 90 ? `${label.slice(0, 87).trimEnd()}…` : label;
}

function tree(directory, depth) {
  const entries = readdirSync(directory).sort((a, b) => {
    const aDir = statSync(join(directory, a)).isDirectory();
    const bDir = statSync(join(directory, b)).isDirectory();
    return aDir === bDir ? a.localeCompare(b) : aDir ? 1 : -1;
  });
  const lines = [];
  for (const entry of entries) {
    const path = join(directory, entry);
    const indent = '  '.repeat(depth);
    if (statSync(path).isDirectory()) lines.push(`${indent}${entry}/`, ...tree(path, depth + 1));
    else if (entry.endsWith('.ts')) lines.push(`${(indent + entry).padEnd(WIDTH)}${describe(path)}`.trimEnd());
  }
  return lines;
}

console.log(['src/', ...tree('src', 1)].join('\n'));
