import { describe, expect, it } from 'vitest';
import { chatRequestView } from '../../src/formats/chat/read.js';
import { MemoryEpochStore } from '../../src/compaction/epochs/epoch-store.js';
import { decodeEpoch, encodeEpoch } from '../../src/compaction/epochs/epoch-codec.js';
import type { CompactionEvent } from '../../src/compaction/ports.js';
import type { ChatMessage } from '../../src/transcript/message.js';
import { compactorWith } from '../support/compaction.js';
import { JsonUpstreamDouble } from '../support/json-upstream-double.js';
import { reReadTurn, fileAt, REREAD_FILES } from '../support/re-reads.js';

/** Issue 25 through the engine: the re-read loop on the default 8k window. */

const compact = (compactor: ReturnType<typeof compactorWith>['compactor'], messages: ChatMessage[], mode?: 'observe') =>
  compactor.compact({ request: chatRequestView({ model: 'm', messages }), tenant: '', signal: new AbortController().signal, ...(mode === undefined ? {} : { mode }) });

/** Runs the re-read loop turn by turn (each request with the whole history) until `until` says stop; returns what each request gave. */
async function run(compactor: ReturnType<typeof compactorWith>['compactor'], turns: number, mode?: 'observe', userWords = '') {
  let history: ChatMessage[] = [{ role: 'system', content: 'You are a careful coding agent.' }];
  const steps: Array<{ history: ChatMessage[]; forwarded: ChatMessage[]; report: string | null }> = [];
  for (let turn = 1; turn <= turns; turn++) {
    const messages = reReadTurn(turn).map((message) => (message.role === 'user' ? { ...message, content: `${String(message.content)}${userWords}` } : message));
    history = [...history, messages[0]!];
    const compacted = await compact(compactor, history, mode);
    compacted.afterResponse?.();
    steps.push({ history, forwarded: compacted.messages, report: compacted.report });
    history = [...history, ...messages.slice(1)];
  }
  return steps;
}

describe('the compression tier through the engine (issue 25)', () => {
  it('compresses instead of summarizing: its report words, an epoch of strategy compress, replayed byte for byte, fewer summary calls', async () => {
    const store = new MemoryEpochStore({ maxEntries: 100, ttlMs: 60_000 });
    const events: CompactionEvent[] = [];
    const observer = { compaction: (event: CompactionEvent) => events.push(event), summary: () => {}, epochLookup: () => {} };
    const { compactor, summarizer } = compactorWith({}, { store, observer });
    const steps = await run(compactor, 12);
    const first = steps.findIndex((step) => step.report !== null);
    expect(steps[first]!.report).toMatch(/^compressed \d+ tool results \(\d+(\.\d)?k? -> \d+(\.\d)?k? tokens\)$/);
    // Without the tier the same run summarizes more often.
    const without = compactorWith({ compaction: { compress: { enabled: false } } });
    await run(without.compactor, 12);
    expect(summarizer.calls).toBeLessThan(without.summarizer.calls);
    expect(events.filter((event) => event.tier === 'compress' && event.outcome === 'compacted').length).toBeGreaterThan(0);
    // The next request forwards the compressed prefix as it was, byte for byte.
    const compressed = steps[first]!.forwarded;
    const next = steps[first + 1]!;
    expect(JSON.stringify(next.forwarded.slice(0, compressed.length - 1))).toBe(JSON.stringify(compressed.slice(0, -1)));
    expect(next.report).toMatch(/^epoch reused|^compressed/);
    // Superseded reads name the later call; the newest copy of each file read so far is forwarded verbatim.
    expect(JSON.stringify(compressed)).toMatch(/superseded by call read_\d+, the same read_file call made (\d+ turns? later|later in this turn)/);
    const turns = steps[first]!.history.filter((message) => message.role === 'user').length - 1;
    for (const [offset, path] of REREAD_FILES.entries()) {
      const newest = Array.from({ length: turns }, (_, index) => index + 1).filter((turn) => turn % 3 === offset).at(-1)!;
      expect(compressed.some((message) => message.content === fileAt(path, newest, 40))).toBe(true);
    }
  });

  it('a summary after compressions keeps its turns compressed: one epoch, both words, replayed byte for byte', async () => {
    // Long user messages (nothing to compress) make compressing no longer enough: a summary is prepared, on a 32k
    // window whose `keep_recent` (6k tokens) holds more compressed turns than raw ones. 44 turns: a crossing that a
    // compression alone meets leaves the summary pending (issue 32), so it is applied a few turns later than at 40.
    const userWords = ` ${'Keep the receipts exact to the cent. '.repeat(32)}`;
    const events: CompactionEvent[] = [];
    const observer = { compaction: (event: CompactionEvent) => events.push(event), summary: () => {}, epochLookup: () => {} };
    const { compactor, summarizer } = compactorWith({}, { upstream: JsonUpstreamDouble.llamaServer({ window: 32_768 }), observer });
    const steps = await run(compactor, 44, undefined, userWords);
    const summaries = events.filter((event) => event.tier === 'summary');
    expect(summaries.length).toBe(summarizer.calls);
    const both = summaries.find((event) => event.written?.report.startsWith('compressed') === true);
    expect(both?.written?.report, summaries.map((event) => event.written?.report).join('\n')).toMatch(
      /^compressed \d+ tool results? \(\d+(\.\d)?k? -> \d+(\.\d)?k? tokens\), summarized \d+ messages -> 1 summary \+ \d+ kept \(/,
    );
    // Once applied, the epoch forwards the summary pair and, after it, kept results with markers; the request after
    // that forwards the same prefix, byte for byte.
    const applied = steps.findIndex((step) => step.forwarded.some((message) => String(message.content).startsWith('[compacted:summary]')));
    const forwarded = steps[applied]!.forwarded;
    const pair = forwarded.findIndex((message) => String(message.content).startsWith('[compacted:summary]'));
    expect(forwarded.slice(pair + 2).some((message) => message.role === 'tool' && String(message.content).includes('[compressed: '))).toBe(true);
    const next = steps[applied + 1]!;
    expect(JSON.stringify(next.forwarded.slice(0, forwarded.length - 1))).toBe(JSON.stringify(forwarded.slice(0, -1)));
  });

  it('the epoch keeps its strategy through a shared store\'s encoding', () => {
    const epoch = { key: 'k'.repeat(22), sourceLength: 4, seenLength: 9, replacement: [{ role: 'tool', tool_call_id: 'c1', content: '[compressed: superseded by call c2, the same read_file call made later (900 bytes removed)]' }], notes: null, strategy: 'compress' as const, report: 'compressed 1 tool result (2.0k -> 1.0k tokens)' };
    expect(decodeEpoch(encodeEpoch(epoch))).toEqual(epoch);
  });

  it('observe mode says what it would compress and writes nothing', async () => {
    const store = new MemoryEpochStore({ maxEntries: 100, ttlMs: 60_000 });
    const { compactor, summarizer } = compactorWith({ compaction: { mode: 'observe' } }, { store });
    const steps = await run(compactor, 12, 'observe');
    const line = steps.map((step) => step.report).find((report) => report?.startsWith('would compress') === true);
    expect(line).toMatch(/^would compress \d+ tool results \(/);
    expect(store.size).toBe(0);
    expect(summarizer.calls).toBe(0);
    for (const step of steps) expect(step.forwarded).toBe(step.history);
  });

  it('issue 36: observe mode with the speeds learned says what compact mode does by cost, not what the token rules would', async () => {
    // A 7B model on one GPU (prefill 5,000, decode 130 tokens a second), learned: the soft zone decides by cost.
    const speeds = () => ({ prefill: 5000, decode: 130, summaryTokens: 400 });
    const firstCompression = (steps: Array<{ report: string | null }>): number => steps.findIndex((step) => /^(would )?compress/.test(step.report ?? ''));
    const byCost = await run(compactorWith({}, { speeds }).compactor, 30);
    const observedByCost = await run(compactorWith({ compaction: { mode: 'observe' } }, { speeds }).compactor, 30, 'observe');
    const observedByTokens = await run(compactorWith({ compaction: { mode: 'observe' } }).compactor, 30, 'observe');
    expect(firstCompression(byCost)).toBeGreaterThan(0);
    expect(firstCompression(observedByCost)).toBe(firstCompression(byCost));
    // The token rules compress earlier in the soft zone: what observe said before it decided by cost.
    expect(firstCompression(observedByTokens)).toBeLessThan(firstCompression(byCost));
  });
});
