import type { ChatMessage } from '../../src/transcript/message.js';
import { factOf } from './conversation.js';

/**
 * The agent loop issue 25 measures: each turn the agent re-reads one of three
 * files it keeps editing (a newer version each time), re-runs the same test
 * command (its output changes with the code) and, every few turns, lists
 * issues as JSON. Turn `turn` plants `FACT-<turn>` in its user message.
 */

export const REREAD_FILES = ['src/cart.ts', 'src/price.ts', 'src/order.ts'] as const;

export interface ReReadOptions {
  /** Lines of each file (about 40 bytes a line). */
  readonly fileLines?: number;
  /** Lines of passing tests in each run. */
  readonly testLines?: number;
  /** Every how many turns a JSON listing is made (0: never). */
  readonly jsonEvery?: number;
}

/** The text of `path` as it reads at `version`: its header names both, so every copy differs. */
export function fileAt(path: string, version: number, lines: number): string {
  const body: string[] = [`// ${path}, version ${version}`];
  for (let line = 1; line < lines; line++) body.push(`export const value${line} = ${(line * 7 + version) % 97}; // line ${line}`);
  return body.join('\n');
}

function testRun(turn: number, lines: number): string {
  const out = ['$ npm test', '', ' RUN  v4.1.12 /repo'];
  for (let line = 0; line < lines; line++) out.push(` ✓ test/case${line}.test.ts > case ${line} passes (${(line * 3 + turn) % 17}ms)`);
  const failing = turn % 3 === 0;
  if (failing) out.push(` FAIL test/cart.test.ts > totals (turn ${turn}): expected 10 to be 12`);
  out.push('', ` Test Files  ${failing ? '1 failed | ' : ''}${lines} passed (${lines + (failing ? 1 : 0)})`, `      Tests  ${lines} passed`, `   Duration  ${(turn % 9) + 1}.2s`);
  return out.join('\n');
}

function issues(turn: number): string {
  const items = Array.from({ length: 30 }, (_, index) => ({ number: index + 1, title: `Issue ${index + 1} about the cart`, state: index === 7 ? 'failed' : 'open', updated: `turn ${turn}` }));
  return JSON.stringify(items, null, 2);
}

const callOf = (id: string, name: string, args: Record<string, unknown>): ChatMessage => ({
  role: 'assistant',
  content: '',
  tool_calls: [{ id, type: 'function', function: { name, arguments: JSON.stringify(args) } }],
});

/** The messages of turn `turn` (1-based): a user task, a re-read, a re-run of the tests, sometimes a listing, an answer. */
export function reReadTurn(turn: number, options: ReReadOptions = {}): ChatMessage[] {
  const { fileLines = 40, testLines = 25, jsonEvery = 4 } = options;
  const path = REREAD_FILES[turn % REREAD_FILES.length]!;
  const messages: ChatMessage[] = [
    { role: 'user', content: `Turn ${turn}: fix the next bug in ${path}; remember ${factOf(turn)}.` },
    callOf(`read_${turn}`, 'read_file', { path }),
    { role: 'tool', tool_call_id: `read_${turn}`, content: fileAt(path, turn, fileLines) },
    callOf(`test_${turn}`, 'bash', { command: 'npm test' }),
    { role: 'tool', tool_call_id: `test_${turn}`, content: testRun(turn, testLines) },
  ];
  if (jsonEvery > 0 && turn % jsonEvery === 0) {
    messages.push(callOf(`issues_${turn}`, 'list_issues', { repo: 'shop', state: 'open' }), { role: 'tool', tool_call_id: `issues_${turn}`, content: issues(turn) });
  }
  messages.push({ role: 'assistant', content: `Edited ${path} for turn ${turn}.` });
  return messages;
}

/** A history of `turns - 1` whole turns and the last turn's user message (a request). */
export function reReadConversation(turns: number, options: ReReadOptions = {}): ChatMessage[] {
  const messages: ChatMessage[] = [{ role: 'system', content: 'You are a careful coding agent.' }];
  for (let turn = 1; turn < turns; turn++) messages.push(...reReadTurn(turn, options));
  messages.push(reReadTurn(turns, options)[0]!);
  return messages;
}
