import { describe, it, expect } from 'vitest';
import type { ChatMessage } from '../../../src/transcript/message.js';
import { compressToolResults, DEFAULT_COMPRESS_SETTINGS } from '../../../src/transcript/compress/compress.js';
import { isRead } from '../../../src/transcript/compress/calls.js';
import { trimJsonArray } from '../../../src/transcript/compress/json-array.js';
import { trimLogLines } from '../../../src/transcript/compress/log-lines.js';

const call = (id: string, name: string, args: Record<string, unknown>): ChatMessage => ({
  role: 'assistant',
  content: '',
  tool_calls: [{ id, type: 'function', function: { name, arguments: JSON.stringify(args) } }],
});
const result = (id: string, content: string): ChatMessage => ({ role: 'tool', tool_call_id: id, content });
const file = (version: number): string => `// src/app.ts version ${version}\n${'export const value = 1;\n'.repeat(40)}`;

describe('compressToolResults', () => {
  it('replaces a read superseded by a later read of the same file with a marker naming the later call', () => {
    const messages: ChatMessage[] = [
      { role: 'system', content: 'agent' },
      { role: 'user', content: 'fix it' },
      call('c1', 'read_file', { path: 'src/app.ts' }),
      result('c1', file(1)),
      // Same arguments in another key order and spacing: the same call.
      { role: 'assistant', content: '', tool_calls: [{ id: 'c2', type: 'function', function: { name: 'read_file', arguments: '{ "path" : "src/app.ts" }' } }] },
      result('c2', file(2)),
      call('c3', 'read_file', { path: 'src/app.ts' }),
      result('c3', file(3)),
    ];
    const { messages: out, compressed } = compressToolResults(messages, { from: 0, to: 6 });
    expect(out[3]!.content).toMatch(/^\[compressed: superseded by call c3, the same read_file call made later in this turn, whose result holds the newer copy \(\d+ bytes removed\)\]$/);
    expect(out[5]!.content).toMatch(/call c3/);
    expect(out[7]).toBe(messages[7]);
    expect([...compressed.values()]).toEqual(['superseded', 'superseded']);
    // Other messages are the same objects; the input is not mutated.
    expect(out[2]).toBe(messages[2]);
    expect(messages[3]!.content).toBe(file(1));
  });

  it('never touches results outside the range, and leaves the newest copy raw', () => {
    const messages = [call('c1', 'bash', { cmd: 'npm test' }), result('c1', 'x'.repeat(500)), call('c2', 'bash', { cmd: 'npm test' }), result('c2', 'y'.repeat(500))];
    expect(compressToolResults(messages, { from: 2, to: 4 }).messages).toBe(messages);
    expect(compressToolResults(messages, { from: 0, to: 4 }).compressed).toEqual(new Map([[1, 'superseded']]));
  });

  it('keeps an identical result once: the earlier copy points at the later one', () => {
    const text = 'z'.repeat(600);
    const messages = [call('c1', 'grep', { q: 'a' }), result('c1', text), call('c2', 'grep', { q: 'b' }), result('c2', text)];
    const { messages: out } = compressToolResults(messages);
    expect(out[1]!.content).toMatch(/^\[compressed: identical to the result of call c2, made later in this turn \(600 bytes removed; copy [0-9a-f]{8}\)\]$/);
    expect(out[3]).toBe(messages[3]);
  });

  it('is idempotent: a compressed history compresses to itself', () => {
    const messages = [call('c1', 'read_file', { path: 'a' }), result('c1', file(1)), call('c2', 'read_file', { path: 'a' }), result('c2', file(2))];
    const once = compressToolResults(messages).messages;
    expect(compressToolResults(once).messages).toBe(once);
  });

  it('leaves short results alone (a marker would save next to nothing)', () => {
    const messages = [call('c1', 'ls', {}), result('c1', 'a b c'), call('c2', 'ls', {}), result('c2', 'a b c d')];
    expect(compressToolResults(messages).messages).toBe(messages);
  });

  it('clears all but the newest N results of a tool only when asked, never an excluded tool', () => {
    const messages = [
      call('c1', 'search', { q: 1 }), result('c1', 's'.repeat(500)),
      call('c2', 'search', { q: 2 }), result('c2', 't'.repeat(500)),
      call('c3', 'memory', { k: 1 }), result('c3', 'm'.repeat(500)),
      call('c4', 'memory', { k: 2 }), result('c4', 'n'.repeat(500)),
    ];
    expect(compressToolResults(messages).messages).toBe(messages);
    const settings = { ...DEFAULT_COMPRESS_SETTINGS, clear: { keep: 1, excludeTools: ['memory'] } };
    const { messages: out, compressed } = compressToolResults(messages, { settings });
    expect(out[1]!.content).toBe('[compressed: an older search result was cleared (500 bytes); it is nowhere else in this conversation: call search again for it]');
    expect([...compressed.keys()]).toEqual([1]);
  });

  it('compresses tool results sent as text parts (qwen-code), writing the marker as one text part', () => {
    const parts = (text: string): ChatMessage['content'] => [{ type: 'text', text }];
    const messages: ChatMessage[] = [
      call('c1', 'read_file', { absolute_path: '/shop/src/cart.js' }),
      { role: 'tool', tool_call_id: 'c1', content: parts(file(1)) },
      call('c2', 'read_file', { absolute_path: '/shop/src/cart.js' }),
      { role: 'tool', tool_call_id: 'c2', content: parts(file(2)) },
      // An image part is not text: such a result is left as it came.
      call('c3', 'read_file', { absolute_path: '/shop/logo.png' }),
      { role: 'tool', tool_call_id: 'c3', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }, { type: 'text', text: 'x'.repeat(500) }] },
      call('c4', 'read_file', { absolute_path: '/shop/logo.png' }),
      { role: 'tool', tool_call_id: 'c4', content: parts('y'.repeat(500)) },
    ];
    const { messages: out, compressed } = compressToolResults(messages);
    expect(out[1]!.content).toEqual([{ type: 'text', text: expect.stringMatching(/^\[compressed: superseded by call c2, the same read_file call made later in this turn, whose result holds the newer copy \(\d+ bytes removed\)\]$/) }]);
    expect([...compressed.keys()]).toEqual([1]);
    expect(out[3]).toBe(messages[3]);
    expect(out[5]).toBe(messages[5]);
    // Compressed once, the parts carry the marker: never compressed again.
    expect(compressToolResults(out).messages).toBe(out);
  });

  it('trims a JSON array result by its structure, never a read', () => {
    const items = Array.from({ length: 40 }, (_, index) => ({ id: index, name: `item ${index}`, ok: index !== 17 ? 'yes' : undefined, ...(index === 17 ? { error: 'disk full' } : {}) }));
    const json = JSON.stringify(items, null, 2);
    const messages = [call('c1', 'list_issues', { state: 'open' }), result('c1', json), call('c2', 'read_file', { path: 'data.json' }), result('c2', json.replace('item 0', 'row 0'))];
    const { messages: out, compressed } = compressToolResults(messages);
    expect(compressed).toEqual(new Map([[1, 'structure']]));
    const trimmed = JSON.parse(out[1]!.content as string) as unknown[];
    expect(trimmed).toContainEqual({ id: 17, name: 'item 17', error: 'disk full' });
    expect(trimmed).toContain('[compressed: 14 items dropped here; ask again for them]');
    expect(trimmed).toContain('[compressed: 19 items dropped here; ask again for them]');
    expect(out[3]).toBe(messages[3]);
  });
});

describe('isRead', () => {
  const info = (name: string, args: Record<string, unknown> | null) => ({ name, arguments: args });
  it('knows a read by its tool name (the configured list, any case) or by its arguments: a path and at most which lines', () => {
    expect(isRead(info('read', { filePath: '/a.ts' }))).toBe(true);
    expect(isRead(info('Read', { file_path: '/a.ts', offset: 10, limit: 50 }))).toBe(true);
    // Whatever a tool is called, a call that only names a file shows it.
    expect(isRead(info('get_source', { absolute_path: '/a.ts' }), [])).toBe(true);
    expect(isRead(info('bash', { command: 'cat src/a.ts' }))).toBe(true);
    // A search, a write, an edit or a test run is no read, even with a path among its arguments or "file" in its name.
    expect(isRead(info('grep', { pattern: 'total', path: '/shop' }))).toBe(false);
    expect(isRead(info('write_file', { file_path: '/a.ts', content: 'x' }))).toBe(false);
    expect(isRead(info('search_file_content', { pattern: 'x' }))).toBe(false);
    expect(isRead(info('bash', { command: 'node --test' }))).toBe(false);
    // The name list is the configuration's: a tool named there reads, whatever its arguments.
    expect(isRead(info('show_page', { id: 7 }), ['show_page'])).toBe(true);
    expect(isRead(info('show_page', { id: 7 }))).toBe(false);
  });

  it('a JSON file read by a tool of any name is never trimmed by its structure; a JSON listing is', () => {
    const json = JSON.stringify(Array.from({ length: 40 }, (_, index) => ({ id: index, name: `item ${index}` })), null, 2);
    const messages = [call('c1', 'get_source', { path: 'data.json' }), result('c1', json), call('c2', 'list_items', { page: 1 }), result('c2', json.replace('item 0', 'row 0'))];
    const { compressed } = compressToolResults(messages);
    expect(compressed).toEqual(new Map([[3, 'structure']]));
  });
});

describe('trimJsonArray', () => {
  it('keeps the first and last items, error-like ones, and counts what it drops', () => {
    const row = (index: number): string => `row ${index} `.padEnd(80, '.');
    const items: unknown[] = Array.from({ length: 8 }, (_, index) => row(index));
    items[3] = { error: 'boom' };
    expect(JSON.parse(trimJsonArray(JSON.stringify(items), 2)!)).toEqual([
      row(0),
      row(1),
      '[compressed: 1 item dropped here; ask again for them]',
      { error: 'boom' },
      '[compressed: 2 items dropped here; ask again for them]',
      row(6),
      row(7),
    ]);
  });
  it('trims the array fields of an object and keeps its other fields', () => {
    const text = JSON.stringify({ total: 30, results: Array.from({ length: 30 }, (_, index) => `r${index}`) });
    expect(JSON.parse(trimJsonArray(text, 1)!)).toEqual({ total: 30, results: ['r0', '[compressed: 28 items dropped here; ask again for them]', 'r29'] });
  });
  it('says null for what is not JSON or has nothing to drop', () => {
    expect(trimJsonArray('not json [1,2]', 2)).toBeNull();
    expect(trimJsonArray('[1,2,3]', 2)).toBeNull();
  });
});

describe('trimLogLines', () => {
  it('keeps error, fail and summary lines and the first and last lines', () => {
    const text = ['$ npm test', ...Array.from({ length: 50 }, (_, index) => `  ✓ case ${index}`), 'FAIL src/a.test.ts > adds', 'Tests: 1 failed, 50 passed', 'Duration 3.1s'].join('\n');
    const trimmed = trimLogLines(text, 2, 0.3)!;
    expect(trimmed.split('\n')).toEqual([
      '$ npm test',
      '  ✓ case 0',
      '[compressed: 49 lines dropped here; run it again for them]',
      'FAIL src/a.test.ts > adds',
      'Tests: 1 failed, 50 passed',
      'Duration 3.1s',
    ]);
  });
  it('says null when it would save less than the share asked', () => {
    const text = Array.from({ length: 20 }, (_, index) => `error ${index}`).join('\n');
    expect(trimLogLines(text, 2, 0.3)).toBeNull();
  });
});
