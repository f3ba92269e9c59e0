import { describe, expect, it, vi } from 'vitest';
import { ContextLengthExceededError, SummaryFailedError } from '../../src/errors.js';
import { MemoryEpochStore } from '../../src/compaction/epochs/epoch-store.js';
import { prefixHashes } from '../../src/compaction/epochs/prefix-hash.js';
import type { ChatMessage } from '../../src/transcript/message.js';
import { findPairProblems } from '../../src/transcript/pairs.js';
import { isMarked } from '../../src/transcript/marks.js';
import { agentLoop, agentStep, conversation, factOf, factsIn, turnMessages } from '../support/conversation.js';
import { compactorWith, SummarizerDouble } from '../support/compaction.js';
import { JsonUpstreamDouble } from '../support/json-upstream-double.js';
import { chatRequestView } from '../../src/formats/chat/read.js';

/**
 * With the default 8k window (7168-token budget, threshold 6093), a scripted
 * conversation of this many turns is the first to cross the threshold by the
 * initial estimate (about 6.5k tokens) while still fitting a suffix-mode summary.
 */
const CROSSING_TURNS = 20;

const body = (messages: ChatMessage[], extra: Record<string, unknown> = {}) => ({ model: 'm', messages, ...extra });

function prepare(compactor: ReturnType<typeof compactorWith>['compactor'], messages: ChatMessage[], tenant = '', extra: Record<string, unknown> = {}) {
  return compactor.compact({ request: chatRequestView(body(messages, extra)), tenant, signal: new AbortController().signal });
}

/** The history after the assistant answers the last turn and the next turn's user message arrives. */
function nextRequest(messages: ChatMessage[], turn: number): ChatMessage[] {
  const full = turnMessages(turn - 1, { turns: turn });
  return [...messages, ...full.slice(1), turnMessages(turn, { turns: turn })[0]!];
}

describe('CompactionEngine.prepare', () => {
  it('forwards a short conversation unchanged, as the same array, without a report or any upstream call', async () => {
    const { compactor, summarizer } = compactorWith();
    const messages = conversation({ turns: 3 });
    const prepared = await prepare(compactor, messages);
    expect(prepared.changed).toBe(false);
    expect(prepared.messages).toBe(messages);
    expect(prepared.report).toBeNull();
    expect(summarizer.calls).toBe(0);
  });

  it('summarizes old turns once the threshold is crossed: head, summary pair, recent turns raw, pairs valid', async () => {
    const { compactor, summarizer } = compactorWith();
    const messages = conversation({ turns: CROSSING_TURNS });
    const prepared = await prepare(compactor, messages);
    expect(summarizer.calls).toBe(1);
    expect(prepared.changed).toBe(true);
    const forwarded = prepared.messages;
    expect(forwarded[0]).toBe(messages[0]);
    expect(isMarked(forwarded[1]!, 'summary')).toBe(true);
    expect(forwarded[1]!.role).toBe('user');
    expect(forwarded[2]!.role).toBe('assistant');
    expect(forwarded.at(-1)).toBe(messages.at(-1));
    expect(findPairProblems(forwarded)).toEqual([]);
    expect(forwarded.length).toBeLessThan(messages.length);
    // Facts of the summarized turns are carried by the notes.
    const text = JSON.stringify(forwarded);
    for (let turn = 1; turn <= CROSSING_TURNS; turn++) expect(text).toContain(factOf(turn));
    expect(prepared.report).toMatch(/^summarized \d+ messages -> 1 summary \+ \d+ kept \([\d.]+k -> [\d.]+k tokens, [\d.]+s\)$/);
  });

  it('asks in suffix mode: the whole candidate plus one instruction, same tools, tool_choice none, no response_format', async () => {
    const { compactor, summarizer } = compactorWith();
    const messages = conversation({ turns: CROSSING_TURNS });
    const tools = [{ type: 'function', function: { name: 'bash', parameters: { type: 'object' } } }];
    await prepare(compactor, messages, '', { tools, response_format: { type: 'json_object' }, n: 2, stream: true, temperature: 0.2 });
    const request = summarizer.bodies[0]!;
    const sent = request['messages'] as ChatMessage[];
    expect(sent.slice(0, messages.length)).toEqual(messages);
    expect(sent).toHaveLength(messages.length + 1);
    expect(sent.at(-1)!.role).toBe('user');
    expect(String(sent.at(-1)!.content)).toMatch(/before the message that begins «Turn \d+: continue the task/);
    expect(request['tools']).toEqual(tools);
    expect(request['tool_choice']).toBe('none');
    expect(request['temperature']).toBe(0.2);
    expect(request['max_tokens']).toBe(1024);
    expect(request['stream']).toBe(false);
    expect(request).not.toHaveProperty('response_format');
    expect(request).not.toHaveProperty('n');
  });

  it('reuses the epoch on the next requests: no new summary, the forwarded prefix byte-identical', async () => {
    const { compactor, summarizer } = compactorWith();
    let messages = conversation({ turns: CROSSING_TURNS });
    const first = await prepare(compactor, messages);
    let previous = first.messages;
    for (let turn = CROSSING_TURNS + 1; turn <= CROSSING_TURNS + 3; turn++) {
      messages = nextRequest(messages, turn);
      const prepared = await prepare(compactor, messages);
      expect(summarizer.calls).toBe(1);
      expect(prepared.report).toMatch(/^epoch reused \(/);
      expect(JSON.stringify(prepared.messages.slice(0, previous.length))).toBe(JSON.stringify(previous));
      previous = prepared.messages;
    }
  });

  it('merges into the earlier notes when the conversation outgrows its epoch, never re-summarizing them as user text', async () => {
    const { compactor, summarizer } = compactorWith();
    let messages = conversation({ turns: CROSSING_TURNS });
    await prepare(compactor, messages);
    let turn = CROSSING_TURNS;
    while (summarizer.calls < 2 && turn < 80) {
      turn++;
      messages = nextRequest(messages, turn);
      await prepare(compactor, messages);
    }
    expect(summarizer.calls).toBe(2);
    const second = summarizer.bodies[1]!['messages'] as ChatMessage[];
    expect(isMarked(second[1]!, 'summary')).toBe(true);
    expect(String(second.at(-1)!.content)).toContain('Earlier notes, marked [compacted:summary] or [compacted:steps], stand near its start: update them');
    const prepared = await prepare(compactor, messages);
    const text = JSON.stringify(prepared.messages);
    for (let planted = 1; planted <= turn; planted++) expect(text).toContain(factOf(planted));
    expect(prepared.messages.filter((message) => isMarked(message, 'summary'))).toHaveLength(2);
  });

  it('shares one summary among concurrent identical requests', async () => {
    const summarizer = new SummarizerDouble();
    summarizer.delayMs = 50;
    const { compactor } = compactorWith({}, { summarizer });
    const messages = conversation({ turns: CROSSING_TURNS });
    const results = await Promise.all([prepare(compactor, messages), prepare(compactor, messages), prepare(compactor, messages)]);
    expect(summarizer.calls).toBe(1);
    expect(JSON.stringify(results[1]!.messages)).toBe(JSON.stringify(results[0]!.messages));
    expect(JSON.stringify(results[2]!.messages)).toBe(JSON.stringify(results[0]!.messages));
  });

  it('keeps epochs apart per tenant', async () => {
    const { compactor, summarizer } = compactorWith();
    const messages = conversation({ turns: CROSSING_TURNS });
    await prepare(compactor, messages, 'tenant-a');
    await prepare(compactor, messages, 'tenant-b');
    expect(summarizer.calls).toBe(2);
    await prepare(compactor, messages, 'tenant-a');
    expect(summarizer.calls).toBe(2);
  });

  it('falls back to prepend mode when the suffix answer is a tool call, rendering the old part as text', async () => {
    const summarizer = new SummarizerDouble();
    let call = 0;
    summarizer.answer = (prompt) =>
      ++call === 1
        ? { choices: [{ message: { role: 'assistant', content: null, tool_calls: [{ id: 'x', type: 'function', function: { name: 'bash', arguments: '{}' } }] } }] }
        : { choices: [{ message: { role: 'assistant', content: `NOTES: ${[...factsIn(prompt)].join(' ')}` } }] };
    const { compactor } = compactorWith({}, { summarizer });
    const prepared = await prepare(compactor, conversation({ turns: CROSSING_TURNS }));
    expect(summarizer.calls).toBe(2);
    const prepend = summarizer.bodies[1]!['messages'] as ChatMessage[];
    expect(prepend.map((message) => message.role)).toEqual(['system', 'user']);
    expect(String(prepend[1]!.content)).toContain('[assistant → call bash #call_1_1]');
    expect(summarizer.bodies[1]).not.toHaveProperty('tools');
    expect(JSON.stringify(prepared.messages)).toContain(factOf(1));
  });

  it('truncates with a marked notice when the summary fails, and does not retry within a minute', async () => {
    let now = 1_000_000;
    const summarizer = new SummarizerDouble();
    summarizer.failures = 100;
    const { compactor } = compactorWith({}, { summarizer, now: () => now });
    const messages = conversation({ turns: CROSSING_TURNS });
    const prepared = await prepare(compactor, messages);
    expect(summarizer.calls).toBe(2); // suffix, then prepend: one try
    expect(isMarked(prepared.messages[1]!, 'truncated')).toBe(true);
    expect(String(prepared.messages[1]!.content)).toMatch(/\d+ earlier messages were omitted/);
    expect(prepared.report).toMatch(/^truncated \d+ messages -> notice \+ \d+ kept/);
    expect(findPairProblems(prepared.messages)).toEqual([]);
    expect(prepared.messages.at(-1)).toBe(messages.at(-1));

    // The truncation stands as an epoch: the next request forwards it with no new try.
    await prepare(compactor, nextRequest(messages, CROSSING_TURNS + 1));
    expect(summarizer.calls).toBe(2);
    // After five minutes the summary is tried again, and now it works.
    now += 5 * 60_000 + 1;
    summarizer.failures = 0;
    const later = await prepare(compactor, nextRequest(messages, CROSSING_TURNS + 1));
    expect(summarizer.calls).toBe(3);
    expect(isMarked(later.messages[1]!, 'summary')).toBe(true);
  });

  it('answers a clear error when the summary fails and on_summary_failure is error', async () => {
    const summarizer = new SummarizerDouble();
    summarizer.failures = 100;
    const { compactor } = compactorWith({ compaction: { on_summary_failure: 'error' } }, { summarizer });
    await expect(prepare(compactor, conversation({ turns: CROSSING_TURNS }))).rejects.toBeInstanceOf(SummaryFailedError);
  });

  it('forwards the history as it is when the summary fails and on_summary_failure is forward', async () => {
    const summarizer = new SummarizerDouble();
    summarizer.failures = 100;
    const { compactor } = compactorWith({ compaction: { on_summary_failure: 'forward' } }, { summarizer });
    const messages = conversation({ turns: CROSSING_TURNS });
    const prepared = await prepare(compactor, messages);
    expect(prepared.messages).toEqual(messages);
  });

  it('answers context_length_exceeded, naming tokens and window, when the last turn alone cannot fit', async () => {
    const { compactor, summarizer } = compactorWith({ models: { '*': { context_window: 4096 } } });
    const messages = conversation({ turns: 3 });
    messages.push({ role: 'user', content: 'x '.repeat(20_000) });
    const error = await prepare(compactor, messages).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ContextLengthExceededError);
    expect((error as ContextLengthExceededError).message).toMatch(/needs about \d+ tokens .* context window is 4096 tokens/);
    expect(summarizer.calls).toBe(0);
  });

  it('says when the last turn fits but the room for a summary does not (a small window)', async () => {
    const { compactor, summarizer } = compactorWith({ models: { '*': { context_window: 2048 } } });
    const messages = conversation({ turns: 6 });
    messages.push({ role: 'user', content: 'y '.repeat(2240) });
    const error = await prepare(compactor, messages).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ContextLengthExceededError);
    expect((error as ContextLengthExceededError).message).toMatch(/its last turn fits, but not with a summary of the earlier turns \(up to \d+ more tokens, compaction.summary.max_tokens\)/);
    expect(summarizer.calls).toBe(0);
  });

  it('prunes old tool results before summarizing when that is enough (no model call)', async () => {
    const { compactor, summarizer } = compactorWith({ models: { '*': { context_window: 32768 } } });
    // Four old turns with 26 KB results: over the threshold, and under the target once they are pruned.
    const messages = conversation({ turns: 5, largeResultEvery: 1, largeResultBytes: 26_000 });
    const prepared = await prepare(compactor, messages);
    expect(summarizer.calls).toBe(0);
    expect(prepared.report).toMatch(/^pruned \d+ tool results/);
    expect(JSON.stringify(prepared.messages)).toContain('bytes elided');
    expect(prepared.messages).toHaveLength(messages.length);
  });

  it('compacts on the message count alone when max_messages fires, keeping at most half of it', async () => {
    const { compactor, summarizer } = compactorWith({ compaction: { max_messages: 40 } }, { upstream: JsonUpstreamDouble.llamaServer({ window: null }) });
    const messages = conversation({ turns: 8 });
    expect(messages.length).toBeGreaterThanOrEqual(40);
    const prepared = await prepare(compactor, messages);
    expect(summarizer.calls).toBe(1);
    expect(prepared.messages.length - 3).toBeLessThanOrEqual(20);
  });

  it('asks the upstream for the exact count near the threshold and compacts on it', async () => {
    // By bytes/4 × 1.25 the request sits under the threshold; the upstream counts 40% more.
    const upstream = JsonUpstreamDouble.llamaServer({ countTokens: (request) => Math.round(JSON.stringify(request['messages']).length / 4 * 1.6) });
    const { compactor, summarizer } = compactorWith({}, { upstream });
    const messages = conversation({ turns: 14 });
    const prepared = await prepare(compactor, messages);
    expect(upstream.calls.some((call) => call.method === 'POST' && call.path === '/v1/chat/completions/input_tokens')).toBe(true);
    expect(summarizer.calls).toBe(1);
    expect(prepared.changed).toBe(true);
  });

  it('discovers the window from /v1/models meta when /props is missing', async () => {
    const upstream = new JsonUpstreamDouble({ 'GET /v1/models': { status: 200, body: { data: [{ id: 'm', meta: { n_ctx: 2048, n_ctx_train: 4096 } }] } } });
    const { compactor } = compactorWith({}, { upstream });
    expect(await compactor.windows.get('m')).toBe(2048);
  });
});

describe('CompactionEngine.prepare on one long agent turn (steps tier)', () => {
  it('runs a 150-step single-turn loop on a 16k window: anchor verbatim, pairs valid, old facts kept, nothing added', async () => {
    const { compactor, summarizer } = compactorWith({ models: { '*': { context_window: 16384 } } });
    const messages = agentLoop(0);
    for (let step = 1; step <= 150; step++) {
      messages.push(...agentStep(step));
      const prepared = await prepare(compactor, messages);
      const forwarded = prepared.messages;
      expect(forwarded[1]).toEqual(messages[1]);
      expect(findPairProblems(forwarded)).toEqual([]);
      expect(forwarded.at(-1)).toEqual(messages.at(-1));
      const text = JSON.stringify(forwarded);
      for (const planted of [factOf(0), factOf(1001), factOf(1000 + step)]) expect(text).toContain(planted);
      if (prepared.changed) {
        // The notes ride on the first kept assistant message: system, task, then that message.
        expect(forwarded[2]!.role).toBe('assistant');
        expect(isMarked(forwarded[2]!, 'steps')).toBe(true);
        expect(String(forwarded[2]!.content)).toMatch(/^\[compacted:steps\] NOTES: .*\n\n$|^\[compacted:steps\] NOTES: .*$/s);
        expect(forwarded[2]!.tool_calls).toEqual(messages.find((message) => message.tool_calls?.[0]?.id === forwarded[2]!.tool_calls?.[0]?.id)!.tool_calls);
      }
    }
    expect(summarizer.calls).toBeGreaterThan(0);
    // One summary per epoch: far fewer summaries than requests.
    expect(summarizer.calls).toBeLessThan(20);
  });
});

describe('CompactionEngine background epochs', () => {
  it('drops a stale pending epoch (one a later compaction overtook) instead of letting it block the next one', async () => {
    const store = new MemoryEpochStore();
    const { compactor, summarizer } = compactorWith({}, { store });
    let messages = conversation({ turns: CROSSING_TURNS });
    const crossed = await prepare(compactor, messages);
    expect(crossed.changed).toBe(true);
    expect(summarizer.calls).toBe(1);
    // A pending epoch over a shorter prefix than the one in use: stale.
    const hashes = prefixHashes({ tenant: '', model: 'm' }, messages);
    store.set({ key: hashes[5]!, sourceLength: 5, seenLength: 5, replacement: messages.slice(0, 5), notes: null, strategy: 'summary', report: 'stale', pending: true });
    // Grow into the soft zone on top of the epoch: the next background epoch starts.
    let turn = CROSSING_TURNS;
    let background: (() => void) | undefined;
    while (background === undefined && turn < CROSSING_TURNS + 30) {
      turn++;
      messages = nextRequest(messages, turn);
      background = (await prepare(compactor, messages)).afterResponse;
    }
    expect(background).toBeTypeOf('function');
    background!();
    await vi.waitFor(() => expect(compactor.runningSummaries).toBe(0));
    expect(summarizer.calls).toBe(2);
    expect(store.get(hashes[5]!)).toBeUndefined();
  });

  it('prepares the next epoch after the answer in the soft zone, forwards raw turns until the threshold, then applies it with no new call', async () => {
    const { compactor, summarizer } = compactorWith();
    // 14 turns: above the soft threshold (0.6 × 7168) and under the threshold (0.85 × 7168).
    let messages = conversation({ turns: 14 });
    const soft = await prepare(compactor, messages);
    expect(soft.changed).toBe(false);
    expect(soft.afterResponse).toBeTypeOf('function');
    expect(summarizer.calls).toBe(0);
    soft.afterResponse!();
    await vi.waitFor(() => expect(compactor.runningSummaries).toBe(0));
    expect(summarizer.calls).toBe(1);

    let turn = 14;
    let crossed = false;
    while (!crossed && turn < 40) {
      turn++;
      messages = nextRequest(messages, turn);
      const prepared = await prepare(compactor, messages);
      prepared.afterResponse?.();
      if (prepared.changed) {
        crossed = true;
        expect(isMarked(prepared.messages[1]!, 'summary')).toBe(true);
        expect(prepared.messages.at(-1)).toBe(messages.at(-1));
      } else {
        expect(prepared.messages).toBe(messages);
      }
    }
    expect(crossed).toBe(true);
    expect(summarizer.calls).toBe(1);
  });

  it('makes a request that crosses the threshold while the background summary runs wait for it, not start another', async () => {
    const summarizer = new SummarizerDouble();
    summarizer.delayMs = 100;
    const { compactor } = compactorWith({}, { summarizer });
    const messages = conversation({ turns: 14 });
    (await prepare(compactor, messages)).afterResponse!();
    expect(compactor.runningSummaries).toBe(1);
    const crossing = await prepare(compactor, conversation({ turns: CROSSING_TURNS }).slice(0, -1).concat(conversation({ turns: CROSSING_TURNS }).slice(-1)));
    expect(summarizer.calls).toBe(1);
    expect(crossing.changed).toBe(true);
  });
});
