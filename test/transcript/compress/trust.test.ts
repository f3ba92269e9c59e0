import { describe, it, expect } from 'vitest';
import type { ChatMessage } from '../../../src/transcript/message.js';
import { compressToolResults } from '../../../src/transcript/compress/compress.js';
import { classify } from '../../../src/transcript/compress/calls.js';

/**
 * Issue 32: compression you can trust. Each of the six shapes an adversarial
 * review found (the working set, shape 6, is tested with the tiers in
 * test/compaction/working-set.test.ts): nothing is lost that no copy holds.
 */

const call = (id: string, name: string, args: Record<string, unknown>): ChatMessage => ({
  role: 'assistant',
  content: '',
  tool_calls: [{ id, type: 'function', function: { name, arguments: JSON.stringify(args) } }],
});
const result = (id: string, content: string, extra: Record<string, unknown> = {}): ChatMessage => ({ role: 'tool', tool_call_id: id, content, ...extra });
const user = (text: string): ChatMessage => ({ role: 'user', content: text });
const file = (name: string, version: number): string => `// ${name} version ${version}\n${'export const value = 1;\n'.repeat(40)}`;
/** The file read twice, by `cat` and by read_file, with the same text. */
const readTwice = (original: string): ChatMessage[] => [
  user('fix billing'),
  call('c1', 'bash', { command: 'cat billing.py' }),
  result('c1', original),
  call('c2', 'read_file', { path: 'billing.py' }),
  result('c2', original),
];
const texts = (messages: readonly ChatMessage[]): string[] => messages.map((message) => String(message.content));

describe('1. identical chains: a marker names only a copy that stays', () => {
  it('a result identical to a later read that is itself superseded by an edited file keeps its text', () => {
    const original = file('billing.py', 1);
    const messages: ChatMessage[] = [
      ...readTwice(original),
      user('now edit it'),
      call('c4', 'read_file', { path: 'billing.py' }),
      result('c4', file('billing.py', 2)),
    ];
    const out = compressToolResults(messages, { from: 0, to: 7 }).messages;
    // The original text is still somewhere raw; the markers name only results that stay raw.
    expect(texts(out)).toContain(original);
    expect(out[4]!.content).toMatch(/^\[compressed: superseded by call c4, the same read_file call made 1 turn later/);
    expect(out[2]).toBe(messages[2]);
  });

  it('a later compression never supersedes the copy an earlier identical marker names', () => {
    const original = file('billing.py', 1);
    const first = readTwice(original);
    const once = compressToolResults(first, { from: 0, to: 3 }).messages;
    expect(once[2]!.content).toMatch(/^\[compressed: identical to the result of call c2, made later in this turn \(\d+ bytes removed; copy [0-9a-f]{8}\)\]$/);
    // The agent edits the file and reads it again: the next compression would supersede c2, whose text c1's marker names.
    const later = [...once, user('now edit it'), call('c4', 'read_file', { path: 'billing.py' }), result('c4', file('billing.py', 2))];
    const twice = compressToolResults(later, { from: 0, to: 7 }).messages;
    expect(twice[4]).toBe(later[4]);
    expect(texts(twice)).toContain(original);
  });
});

describe('2. only a successful, non-empty result supersedes', () => {
  const page = `<html>${'<p>prices and totals</p>\n'.repeat(30)}</html>`;
  const fetchOf = (id: string): ChatMessage => call(id, 'web_fetch', { url: 'https://shop.test/prices' });
  it.each([
    ['a 503', 'Error: 503 Service Unavailable'],
    ['an "Error:" answer', 'Error: ENOENT: no such file or directory'],
    ['an HTTP status line', 'HTTP/1.1 503 Service Unavailable'],
    ['an empty result', ''],
  ])('%s never supersedes the good copy', (_, failed) => {
    const messages = [user('check prices'), fetchOf('f1'), result('f1', page), user('again'), fetchOf('f2'), result('f2', failed)];
    expect(compressToolResults(messages, { from: 0, to: 5, settings: { ...defaults(), minResultChars: 0 } }).messages[2]).toBe(messages[2]);
  });

  it('neither does a result marked is_error, nor a command that exited non-zero', () => {
    const run = (id: string): ChatMessage => call(id, 'bash', { command: 'npm test' });
    const log = ['$ npm test', ...Array.from({ length: 30 }, (_, index) => ` ✓ case ${index} passes`), 'Tests  30 passed'].join('\n');
    const messages = [
      user('test'),
      fetchOf('f1'),
      result('f1', page),
      run('t1'),
      result('t1', log),
      user('again'),
      fetchOf('f2'),
      result('f2', page.replace('prices', 'PRICES'), { is_error: true }),
      run('t2'),
      result('t2', `${log.replace('30 passed', '29 passed')}\nexit code 1`),
    ];
    const { compressed } = compressToolResults(messages, { from: 0, to: 6, settings: { ...defaults(), structure: false } });
    expect(compressed.size).toBe(0);
  });
});

describe('3. a result answers the call of its own step, never one of another turn', () => {
  it('ids reused every turn (call_0) do not make one file supersede another', () => {
    const messages = [
      user('read a'),
      call('call_0', 'read_file', { path: 'a.ts' }),
      result('call_0', file('a.ts', 1)),
      user('read b'),
      call('call_0', 'read_file', { path: 'b.ts' }),
      result('call_0', file('b.ts', 1)),
      user('read b again'),
      call('call_0', 'read_file', { path: 'b.ts' }),
      result('call_0', file('b.ts', 2)),
    ];
    const { messages: out, compressed } = compressToolResults(messages, { from: 0, to: 7 });
    expect(out[2]).toBe(messages[2]);
    expect([...compressed.keys()]).toEqual([5]);
    expect(out[5]!.content).toMatch(/superseded by call call_0, the same read_file call made 1 turn later/);
  });
});

describe('4. only reads and idempotent commands are superseded or kept once', () => {
  it('BashOutput chunks, cursor pages and tools not recognized keep their text', () => {
    const chunk = (index: number): string => `build step ${index}\n${'compiling module\n'.repeat(30)}`;
    const step = (id: string, name: string, args: Record<string, unknown>, text: string): ChatMessage[] => [call(id, name, args), result(id, text)];
    // The same calls twice: none of them a read or an idempotent command, so the later never supersedes the earlier.
    const messages = [
      user('watch the build'),
      ...step('b1', 'BashOutput', { bash_id: 'shell_1' }, chunk(1)),
      ...step('p1', 'list_issues', { cursor: 'abc' }, chunk(2)),
      ...step('x1', 'deploy_preview', { site: 'shop' }, chunk(3)),
      ...step('b2', 'BashOutput', { bash_id: 'shell_1' }, chunk(4)),
      ...step('p2', 'list_issues', { cursor: 'abc' }, chunk(5)),
      ...step('x2', 'deploy_preview', { site: 'shop' }, chunk(3)),
    ];
    expect(compressToolResults(messages, { from: 0, to: 7 }).compressed.size).toBe(0);
  });
});

describe('5. trimming by structure only for recognized command output; reads recognized widely', () => {
  const source = ['"""Billing."""', ...Array.from({ length: 200 }, (_, index) => `    total_${index} = price * qty  # line ${index}`), 'def done(): pass'].join('\n');
  it.each([
    ['bash', { command: 'cd src && cat billing.py' }],
    ['bash', { command: 'git show HEAD~1:src/billing.py' }],
    ['get_file', { path: 'src/billing.py', ref: 'main' }],
    ['str_replace_editor', { command: 'view', path: '/repo/src/billing.py' }],
    ['shell', { command: ['bash', '-lc', "sed -n '1,200p' src/billing.py"] }],
    // Not recognized as command output: kept as it is, whatever it looks like.
    ['custom_tool', { x: 1 }],
  ])('%s %j is never trimmed', (name, args) => {
    const messages = [user('read billing'), call('r1', name, args), result('r1', source), call('r2', 'noop', {}), result('r2', 'ok')];
    expect(compressToolResults(messages, { from: 0, to: 3 }).messages[2]).toBe(messages[2]);
  });

  it('a test run, a build, ls and grep are trimmed', () => {
    const log = ['$ run', ...Array.from({ length: 200 }, (_, index) => `  ok step ${index}`), 'FAIL one', 'Tests: 1 failed'].join('\n');
    for (const args of [{ command: 'npm test' }, { command: 'cd app && npx tsc --noEmit' }, { command: 'ls -la src' }, { command: 'grep -rn total src' }]) {
      const messages = [user('run'), call('r1', 'bash', args), result('r1', log)];
      expect(compressToolResults(messages, { from: 0, to: 3 }).compressed.get(2), JSON.stringify(args)).toBe('structure');
    }
  });

  it('classify knows the file a read shows, and that a versioned read shows no working-tree file', () => {
    expect(classify({ name: 'bash', arguments: { command: 'cd src && cat billing.py' } })).toEqual({ kind: 'read', file: 'src/billing.py' });
    expect(classify({ name: 'get_file', arguments: { path: 'src/billing.py', ref: 'main' } })).toEqual({ kind: 'read', file: null });
    expect(classify({ name: 'str_replace_editor', arguments: { command: 'view', path: 'a.py' } })).toEqual({ kind: 'read', file: 'a.py' });
    expect(classify({ name: 'bash', arguments: { command: 'tail -f server.log' } })).toEqual({ kind: 'other', file: null });
  });
});

function defaults(): NonNullable<NonNullable<Parameters<typeof compressToolResults>[1]>['settings']> {
  return { superseded: true, identical: true, structure: true, minResultChars: 400, keepItems: 3, keepLines: 5, clear: { keep: 0, excludeTools: [] } };
}
