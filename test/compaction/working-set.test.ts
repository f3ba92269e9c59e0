import { describe, expect, it } from 'vitest';
import { chatRequestView } from '../../src/formats/chat/read.js';
import type { ChatMessage } from '../../src/transcript/message.js';
import { carriedFiles, workingSetBlock } from '../../src/transcript/compress/working-set.js';
import { compactorWith } from '../support/compaction.js';
import { JsonUpstreamDouble } from '../support/json-upstream-double.js';
import { fileAt, REREAD_FILES, reReadTurn } from '../support/re-reads.js';

/**
 * Issue 32, shape 6: the working set. On the re-read loop (three files the
 * agent keeps editing, re-read in turn) the summary cut took the newest read
 * of one of them: the model had to edit a file it could no longer see. The
 * newest copy of each file read stays raw through every tier, summary and
 * steps cuts included, up to `compaction.working_set` of the budget.
 */

type Compactor = ReturnType<typeof compactorWith>['compactor'];

const compact = (compactor: Compactor, messages: ChatMessage[]) =>
  compactor.compact({ request: chatRequestView({ model: 'm', messages }), tenant: '', signal: new AbortController().signal });

/** The re-read loop, a request per turn; what each request forwarded. */
async function run(compactor: Compactor, turns: number, userWords = ''): Promise<Array<{ forwarded: readonly ChatMessage[]; turn: number }>> {
  let history: ChatMessage[] = [{ role: 'system', content: 'You are a careful coding agent.' }];
  const steps: Array<{ forwarded: readonly ChatMessage[]; turn: number }> = [];
  for (let turn = 1; turn <= turns; turn++) {
    const messages = reReadTurn(turn).map((message) => (message.role === 'user' ? { ...message, content: `${String(message.content)}${userWords}` } : message));
    history = [...history, messages[0]!];
    const compacted = await compact(compactor, history);
    compacted.afterResponse?.();
    steps.push({ forwarded: compacted.messages, turn });
    history = [...history, ...messages.slice(1)];
  }
  return steps;
}

/** How many of the three files have the newest version read before `turn` verbatim somewhere in `forwarded`. */
function newestCopies(forwarded: readonly ChatMessage[], turn: number): number {
  const text = forwarded.map((message) => (typeof message.content === 'string' ? message.content : JSON.stringify(message.content))).join('\n');
  let found = 0;
  for (const [offset, path] of REREAD_FILES.entries()) {
    const newest = Array.from({ length: turn - 1 }, (_, index) => index + 1).filter((read) => read % REREAD_FILES.length === offset).at(-1);
    if (newest === undefined || text.includes(fileAt(path, newest, 40))) found++;
  }
  return found;
}

/** Long user messages: nothing a compression frees, so the loop must summarize. */
const USER_WORDS = ` ${'Keep the receipts exact to the cent. '.repeat(24)}`;

describe('the working set (issue 32, shape 6)', () => {
  it('every request after a summary on an 8k window still holds the newest copy of each of the three files', async () => {
    const { compactor, summarizer } = compactorWith({}, { upstream: JsonUpstreamDouble.llamaServer({ window: 8192 }) });
    const steps = await run(compactor, 30, USER_WORDS);
    expect(summarizer.calls).toBeGreaterThan(0);
    for (const step of steps) expect(newestCopies(step.forwarded, step.turn), `turn ${step.turn}`).toBe(3);
    // Without it (working_set 0) a summary takes one of them: the shape the issue found.
    const without = compactorWith({ compaction: { working_set: 0 } }, { upstream: JsonUpstreamDouble.llamaServer({ window: 8192 }) });
    const bare = await run(without.compactor, 30, USER_WORDS);
    expect(bare.some((step) => newestCopies(step.forwarded, step.turn) < 3)).toBe(true);
  });

  it('the summary prompt is told which files are kept after the notes, and they follow the notes in the summary pair', async () => {
    const { compactor, summarizer } = compactorWith({}, { upstream: JsonUpstreamDouble.llamaServer({ window: 8192 }) });
    const steps = await run(compactor, 30, USER_WORDS);
    const prompts = summarizer.bodies.map((body) => JSON.stringify(body['messages']));
    expect(prompts.some((prompt) => /These files stay verbatim after your notes, as they were last read: \\"src\/(cart|price|order)\.ts\\"/.test(prompt))).toBe(true);
    const pair = steps.flatMap((step) => step.forwarded).find((message) => message.role === 'user' && String(message.content).startsWith('[compacted:summary]') && carriedFiles(String(message.content)).length > 0);
    expect(pair).toBeDefined();
  });

  it('steps cuts carry it too: an agent loop under one user message keeps the files its old steps read', async () => {
    const { compactor, summarizer } = compactorWith({}, { upstream: JsonUpstreamDouble.llamaServer({ window: 8192 }) });
    let history: ChatMessage[] = [{ role: 'system', content: 'You are a careful coding agent.' }, { role: 'user', content: `Fix the cart.${USER_WORDS}` }];
    for (let step = 1; step <= 30; step++) {
      // Every assistant message says something long (nothing a compression frees), so the loop must summarize its steps.
      const messages = reReadTurn(step).filter((message) => message.role !== 'user').map((message) => (message.role === 'assistant' && message.tool_calls === undefined ? { ...message, content: `${String(message.content)}${USER_WORDS}` } : message));
      history = [...history, ...messages];
      const compacted = await compact(compactor, history);
      compacted.afterResponse?.();
      expect(newestCopies(compacted.messages, step + 1), `step ${step}`).toBe(3);
    }
    expect(summarizer.calls).toBeGreaterThan(0);
  });

  it('a carried block reads back exactly, whatever the text holds', () => {
    const files = [
      { file: 'src/a "quoted".ts', callId: 'call_0', text: 'one\n</file>\ntwo' },
      { file: 'b.ts', callId: 'c2', text: '' },
    ];
    expect(carriedFiles(`notes${workingSetBlock(files)}`)).toEqual(files);
  });
});
