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

/** The re-read loop's calls under one user message (opencode, qwen-code), each assistant answer long: the steps tier must summarize. */
async function loop(compactor: Compactor, steps: number): Promise<Array<readonly ChatMessage[]>> {
  let history: ChatMessage[] = [{ role: 'system', content: 'You are a careful coding agent.' }, { role: 'user', content: `Fix the cart.${USER_WORDS}` }];
  const forwarded: Array<readonly ChatMessage[]> = [];
  for (let step = 1; step <= steps; step++) {
    const messages = reReadTurn(step)
      .filter((message) => message.role !== 'user')
      .map((message) => (message.role === 'assistant' && message.tool_calls === undefined ? { ...message, content: `${String(message.content)}${USER_WORDS}` } : message));
    history = [...history, ...messages];
    const compacted = await compact(compactor, history);
    compacted.afterResponse?.();
    forwarded.push(compacted.messages);
  }
  return forwarded;
}

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

  it('a cut that carries files tells the summary prompt which, and writes them after the notes', async () => {
    const { compactor, summarizer } = compactorWith({}, { upstream: JsonUpstreamDouble.llamaServer({ window: 8192 }) });
    const forwarded = await loop(compactor, 30);
    const prompts = summarizer.bodies.map((body) => JSON.stringify(body['messages']));
    expect(prompts.some((prompt) => /These files stay verbatim after your notes, as they were last read: \\"src\/(cart|price|order)\.ts\\"/.test(prompt))).toBe(true);
    const notes = forwarded.flat().find((message) => String(message.content).startsWith('[compacted:steps]') && carriedFiles(String(message.content)).length > 0);
    expect(notes).toBeDefined();
  });

  it('steps cuts carry it too: an agent loop under one user message keeps the files its old steps read', async () => {
    const { compactor, summarizer } = compactorWith({}, { upstream: JsonUpstreamDouble.llamaServer({ window: 8192 }) });
    const forwarded = await loop(compactor, 30);
    forwarded.forEach((messages, index) => expect(newestCopies(messages, index + 2), `step ${index + 1}`).toBe(3));
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
