import { describe, expect, it } from 'vitest';
import { appliedPending } from '../../src/compaction/policy/applied-pending.js';
import { budgetOf } from '../../src/compaction/policy/budget.js';
import { type CandidateSizes, decide, decisionSettingsOf } from '../../src/compaction/policy/decide.js';
import { candidateOf } from '../../src/compaction/policy/plan.js';
import { sizesOf, totalSize } from '../../src/compaction/policy/sizing.js';
import type { Epoch } from '../../src/compaction/types.js';
import { mark } from '../../src/transcript/marks.js';
import { chatRequestView } from '../../src/formats/chat/read.js';
import type { ChatMessage } from '../../src/transcript/message.js';
import { carriedFiles, fitting, newestReads, withoutSupersededCarried, workingSetBlock } from '../../src/transcript/compress/working-set.js';
import { compactorWith, configWith } from '../support/compaction.js';
import { JsonUpstreamDouble } from '../support/json-upstream-double.js';
import { fileAt, REREAD_FILES, reReadConversation, reReadTurn } from '../support/re-reads.js';

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

  it('holds at most the five files read last, however much room the share leaves (an agent that reads each file once moves on from it)', () => {
    const messages: ChatMessage[] = [{ role: 'system', content: 'You are a careful coding agent.' }, { role: 'user', content: 'Read them all.' }];
    for (let file = 1; file <= 8; file++) messages.push(...step(`read_${file}`, 'read_file', { path: `src/f${file}.ts` }, fileText(`src/f${file}.ts`, 400)));
    const reads = newestReads(messages, new Set());
    expect(reads).toHaveLength(8);
    expect(fitting(reads, 100_000, (text) => text.length / 4).map((read) => read.file)).toEqual(['src/f8.ts', 'src/f7.ts', 'src/f6.ts', 'src/f5.ts', 'src/f4.ts']);
  });

  it('a carried block reads back exactly, whatever the text holds', () => {
    const files = [
      { file: 'src/a "quoted".ts', callId: 'call_0', text: 'one\n</file>\ntwo' },
      { file: 'b.ts', callId: 'c2', text: '' },
    ];
    expect(carriedFiles(`notes${workingSetBlock(files)}`)).toEqual(files);
  });
});

/** A tool call and its result, as one step of an assistant turn. */
const step = (id: string, name: string, args: Record<string, unknown>, content: string): ChatMessage[] => [
  { role: 'assistant', content: '', tool_calls: [{ id, type: 'function', function: { name, arguments: JSON.stringify(args) } }] },
  { role: 'tool', tool_call_id: id, content },
];

/** A file of about `chars` characters whose every line names it. */
const fileText = (path: string, chars: number): string => Array.from({ length: Math.ceil(chars / 40) }, (_, line) => `// ${path} line ${line}`.padEnd(39, '.')).join('\n');

describe('the working set where the soft zone and a pending epoch compress (issue 32, gaps left by the first pass)', () => {
  const sizes = (messages: readonly ChatMessage[]): CandidateSizes => ({ ...sizesOf(messages, 0, 1), ratio: 1 });
  const idle = { pending: null, running: false, attempt: 0 };

  it('a soft-zone compression that clears old results (compress.clear) leaves the newest copy of each file read alone', () => {
    // 8k window: 7,168 tokens of budget, soft zone from 4,300; the working set set to a quarter (1,792 tokens: the newest 3 or 4 of these files).
    const budget = budgetOf(8192, undefined, 1024, 1024);
    const settings = decisionSettingsOf(configWith({ compaction: { working_set: 0.25, compress: { clear: { keep: 1 } } } }).compaction);
    const messages: ChatMessage[] = [{ role: 'system', content: 'You are a careful coding agent.' }];
    for (let file = 1; file <= 8; file++) messages.push({ role: 'user', content: `Look at src/f${file}.ts.` }, ...step(`read_${file}`, 'read_file', { path: `src/f${file}.ts` }, fileText(`src/f${file}.ts`, 1600)), { role: 'assistant', content: 'Read it.' });
    // Test runs after the reads fill the protected tail: every read lies before it.
    for (let run = 1; run <= 3; run++) messages.push({ role: 'user', content: `Run the tests (${run}).` }, ...step(`test_${run}`, 'bash', { command: 'npm test' }, `$ npm test\n${` ✓ test/case.test.ts > passes (run ${run})\n`.repeat(70)}`), { role: 'assistant', content: 'Ran them.' });
    messages.push({ role: 'user', content: 'Now fix src/f8.ts.' });
    const size = totalSize(sizes(messages));
    expect(size).toBeGreaterThan(settings.softThreshold * budget.tokens!);
    expect(size).toBeLessThan(settings.threshold * budget.tokens!);
    const decision = decide(candidateOf(messages, null), sizes(messages), budget, idle, settings);
    expect(decision.kind).toBe('compress');
    const forwarded = JSON.stringify((decision as { plan: { messages: ChatMessage[] } }).plan.messages);
    // Clearing ran (an old read outside the working set is gone) ...
    expect(forwarded).not.toContain(JSON.stringify(fileText('src/f1.ts', 1600)));
    // ... and the three newest files read are still there verbatim (clear's `keep: 1` alone would keep only f8's).
    for (const file of [6, 7, 8]) expect(forwarded, `src/f${file}.ts`).toContain(JSON.stringify(fileText(`src/f${file}.ts`, 1600)));
  });

  it('a pending summary applied at the crossing does not prune a kept file read over prune.max_result_chars', () => {
    // 32k window: the working set a quarter of 31,744 tokens, room for a 9,000-character file; prune.max_result_chars is 8,192.
    const budget = budgetOf(32_768, undefined, 1024, 1024);
    const settings = decisionSettingsOf(configWith().compaction);
    const big = fileText('src/big.ts', 9000);
    const messages = reReadConversation(24).flatMap((message) =>
      message.role === 'user' && String(message.content).startsWith('Turn 8:') ? [message, ...step('read_big', 'read_file', { path: 'src/big.ts' }, big)] : [message],
    );
    // A pending summary of the first 6 turns, prepared when the history had 9: it keeps turns 7 and 8 raw.
    const kept = messages.findIndex((message) => message.role === 'user' && String(message.content).startsWith('Turn 7:'));
    const seen = messages.findIndex((message) => message.role === 'user' && String(message.content).startsWith('Turn 9:')) + 1;
    const replacement = [messages[0]!, { role: 'user', content: mark('summary', 'notes') }, { role: 'assistant', content: mark('summary', 'Understood; continuing from these notes.') }, ...messages.slice(kept, seen - 1)];
    const pending: Epoch = { key: `h${seen}`, sourceLength: seen - 1, seenLength: seen, replacement, marked: [1, 2], notes: 'notes', strategy: 'summary', report: 'summarized 40 messages -> 1 summary + 12 kept (9.0k -> 3.0k tokens, 1.0s)', pending: true };
    const hashes = Array.from({ length: messages.length + 1 }, (_, index) => `h${index}`);
    const applied = appliedPending(pending, { messages, hashes, toolsEstimate: 0, budget }, settings, 1);
    // It did compress what it keeps (superseded re-reads) ...
    expect(applied.replacement.some((message) => String(message.content).includes('[compressed: superseded by call '))).toBe(true);
    // ... but the newest (only) copy of src/big.ts is forwarded whole.
    expect(candidateOf(messages, applied).messages.some((message) => message.content === big)).toBe(true);
  });
});

describe('a file carried after the notes is taken out once a newer read of it stays raw (issue 32, the 4k re-read loop)', () => {
  const v1 = fileText('src/cart.ts', 1600);
  const v2 = `${fileText('src/cart.ts', 1600)}\n// edited`;
  const notesWith = (files: Array<{ file: string; callId: string; text: string }>): ChatMessage => ({ role: 'user', content: mark('summary', `notes${workingSetBlock(files)}`) });
  /** A history after a summary that carried src/cart.ts (read by call_0) and src/price.ts, then `after`. */
  const history = (after: ChatMessage[]): ChatMessage[] => [
    { role: 'system', content: 'You are a careful coding agent.' },
    notesWith([{ file: 'src/cart.ts', callId: 'call_0', text: v1 }, { file: 'src/price.ts', callId: 'call_1', text: fileText('src/price.ts', 800) }]),
    { role: 'assistant', content: mark('summary', 'Understood; continuing from these notes.') },
    { role: 'user', content: 'Fix the cart.' },
    ...after,
  ];
  const trusted = new Set([1, 2]);

  it('takes the superseded copy out of its block, says which call holds the newer read, and keeps the other file', () => {
    const messages = history(step('call_0', 'read_file', { path: 'src/cart.ts' }, v2));
    const out = withoutSupersededCarried(messages, { from: 1, to: 3, trusted, keepsRaw: () => true });
    expect(out).not.toBe(messages);
    const notes = String(out[1]!.content);
    expect(carriedFiles(notes).map((file) => file.file)).toEqual(['src/price.ts']);
    expect(notes).not.toContain(v1);
    // The marker names the call (reused id: the later one, in this conversation) that holds the newer read.
    expect(notes).toContain('["src/cart.ts" as call call_0 read it (1599 chars) was taken out: call call_0, later in this conversation, holds a newer read of it]');
    expect(out.slice(2)).toEqual(messages.slice(2));
  });

  it('keeps it when the newer read failed, is not kept raw, or is not a read of that file', () => {
    const failed = history(step('call_0', 'read_file', { path: 'src/cart.ts' }, 'Error: ENOENT: no such file or directory'));
    expect(withoutSupersededCarried(failed, { from: 1, to: 3, trusted, keepsRaw: () => true })).toBe(failed);
    const compressedAway = history(step('call_0', 'read_file', { path: 'src/cart.ts' }, v2));
    expect(withoutSupersededCarried(compressedAway, { from: 1, to: 3, trusted, keepsRaw: () => false })).toBe(compressedAway);
    const other = history(step('call_0', 'read_file', { path: 'src/order.ts' }, v2));
    expect(withoutSupersededCarried(other, { from: 1, to: 3, trusted, keepsRaw: () => true })).toBe(other);
    // Notes that are not compactor's own (an untrusted copy of the block) are never rewritten.
    const forged = history(step('call_0', 'read_file', { path: 'src/cart.ts' }, v2));
    expect(withoutSupersededCarried(forged, { from: 1, to: 3, trusted: new Set(), keepsRaw: () => true })).toBe(forged);
  });

  it('on a 4k window every request of the re-read loop holds the newest copy of each of the three files', async () => {
    // 4k: a 3,072-token budget; the three files are about 1,500 of it. The first pass held one of them (a quarter of the budget).
    const { compactor, summarizer } = compactorWith({}, { upstream: JsonUpstreamDouble.llamaServer({ window: 4096 }) });
    const steps = await run(compactor, 30);
    expect(summarizer.calls).toBeGreaterThan(0);
    for (const entry of steps) expect(newestCopies(entry.forwarded, entry.turn), `turn ${entry.turn}`).toBe(3);
    // Carried copies that a later re-read superseded were taken out of their block, not left beside the newer read.
    expect(steps.some((entry) => entry.forwarded.some((message) => /\[\"src\/(cart|price|order)\.ts\" as call read_\d+ read it \(\d+ chars\) was taken out: call read_\d+/.test(String(message.content))))).toBe(true);
  });

  it('on a 4k window with the speeds learned (by cost), every request of the loop, one after each tool result, holds the newest copy of each of the three files', async () => {
    // The bench's loop (bench/compress.ts): a request after each tool result, by cost. At each list_issues result a steps
    // summary counted its notes at their largest (512 tokens) and was 9 tokens short of room for the third file, so it
    // left it out (turn 8: 2 of 3); the notes came back at a fifth of that. Speeds as in cost.test.ts: a 7B model on one GPU.
    const speeds = () => ({ prefill: 5000, decode: 130, summaryTokens: 400 });
    const { compactor, summarizer } = compactorWith({}, { upstream: JsonUpstreamDouble.llamaServer({ window: 4096 }), speeds });
    let history: ChatMessage[] = [{ role: 'system', content: 'You are a careful coding agent.' }];
    const requests: Array<{ forwarded: readonly ChatMessage[]; reads: number; at: string }> = [];
    const send = async (reads: number, at: string): Promise<void> => {
      const compacted = await compact(compactor, history);
      compacted.afterResponse?.();
      requests.push({ forwarded: compacted.messages, reads, at });
    };
    const turns = 40;
    for (let turn = 1; turn <= turns; turn++) {
      const messages = reReadTurn(turn);
      history = [...history, messages[0]!];
      await send(turn - 1, `turn ${turn}`);
      for (let index = 1; index < messages.length - 1; index++) {
        history = [...history, messages[index]!];
        if (messages[index]!.role === 'tool') await send(turn, `turn ${turn}, message ${index}`);
      }
      history = [...history, messages.at(-1)!];
    }
    expect(summarizer.calls).toBeGreaterThan(0);
    // newestCopies counts the reads before the turn it is given.
    for (const request of requests) expect(newestCopies(request.forwarded, request.reads + 1), request.at).toBe(3);
  });

  it('at a crossing with a summary pending that would leave the history in the soft zone, a compression that alone gets back under the threshold is made instead', () => {
    // The re-read loop's history, its budget set so that it has just crossed (a 4k window applied a pending summary at
    // each crossing: it freed about a step, the history stayed in the soft zone and the next summary was prepared at once).
    const sizes = (messages: readonly ChatMessage[]): CandidateSizes => ({ ...sizesOf(messages, 0, 1), ratio: 1 });
    const idle = { pending: null, running: false, attempt: 0 };
    const messages = reReadConversation(9);
    const size = totalSize(sizes(messages));
    const budget = budgetOf(Math.ceil(size / 0.86) + 1024, undefined, 1024, 1024);
    const settings = decisionSettingsOf(configWith().compaction);
    expect(size).toBeGreaterThan(settings.threshold * budget.tokens!);
    const pending: Epoch = { key: 'k', sourceLength: 5, seenLength: 5, replacement: messages.slice(0, 3), notes: 'n', strategy: 'summary', report: '', pending: true };
    const decision = decide(candidateOf(messages, null), sizes(messages), budget, { ...idle, pending }, settings);
    expect(decision.kind).toBe('compress');
    expect((decision as { plan: { size: number } }).plan.size).toBeLessThan(settings.threshold * budget.tokens!);
    // Where no compression gets under the threshold (a user message alone as large as the history), the pending summary applies.
    const crossing: ChatMessage[] = [...messages.slice(0, -1), { role: 'user', content: 'Fix it. '.repeat(size) }];
    expect(decide(candidateOf(crossing, null), sizes(crossing), budget, { ...idle, pending }, settings)).toEqual({ kind: 'apply-pending', epoch: pending });
    // A pending summary that gets the history out of the soft zone (it covers all but the last message) applies.
    const whole: Epoch = { ...pending, sourceLength: messages.length - 1, seenLength: messages.length - 1 };
    expect(decide(candidateOf(messages, null), sizes(messages), budget, { ...idle, pending: whole }, settings)).toEqual({ kind: 'apply-pending', epoch: whole });
  });
});

describe('a forced compaction keeps its files within their share of the history it shrinks (issue 38: Codex compacts at its own limit)', () => {
  it('on a large window, the files carried after the notes take at most the working set share of the history, so what the client asked to shrink shrinks', async () => {
    // Codex's run: a 131k window, compaction asked at 20k tokens. A share of the budget (half of 131k) carried every file read.
    const { compactor, summarizer } = compactorWith({}, { upstream: JsonUpstreamDouble.llamaServer({ window: 131_072 }) });
    const messages: ChatMessage[] = [{ role: 'system', content: 'You are Codex.' }, { role: 'user', content: 'Read every file in parts/ and write result.txt.' }];
    for (let part = 0; part < 5; part++) messages.push(...step(`c${part}`, 'read_file', { path: `parts/${part}.txt` }, fileText(`parts/${part}.txt`, 8_000)));
    messages.push({ role: 'user', content: 'Go on.' });
    const forced = await compactor.compact({ request: chatRequestView({ model: 'm', messages }), tenant: '', signal: new AbortController().signal, mode: 'force' });
    expect(summarizer.calls).toBe(1);
    const carried = forced.messages.flatMap((message) => carriedFiles(typeof message.content === 'string' ? message.content : ''));
    expect(carried.length, 'the newest reads are still carried').toBeGreaterThan(0);
    expect(carried.length, 'but not every one').toBeLessThan(5);
    const chars = (list: readonly ChatMessage[]): number => JSON.stringify(list).length;
    expect(chars(forced.messages)).toBeLessThan(chars(messages) * 0.7);
  });
});
