import { describe, expect, it, vi } from 'vitest';
import type { ChatMessage } from '../../src/transcript/message.js';
import { chatRequestView } from '../../src/formats/registry.js';
import { conversation } from '../support/conversation.js';
import { compactorWith, SummarizerDouble } from '../support/compaction.js';

/**
 * Issue 21 items 3 and 5: summary slots are served round-robin across
 * tenants, one tenant may have only so many summaries queued, and the
 * background queue is bounded (stalest dropped first). Time is counted in
 * summary calls: the double answers only when the test lets one finish.
 */

/** A summarizer whose calls finish one at a time, when the test says so. */
class GatedSummarizer extends SummarizerDouble {
  readonly #waiting: Array<() => void> = [];
  finished = 0;

  constructor() {
    super();
    const answer = this.call;
    (this as { call: SummarizerDouble['call'] }).call = async (body, signal) => {
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
      this.finished++;
      return answer(body, signal);
    };
  }

  get inFlight(): number {
    return this.#waiting.length;
  }

  /** Lets the oldest running call finish. */
  finishOne(): void {
    this.#waiting.shift()?.();
  }
}

const CROSSING_TURNS = 20;
const SOFT_TURNS = 14;
const historyOf = (tenant: string, number: number, turns: number): ChatMessage[] => conversation({ turns, system: `Agent ${number} of tenant ${tenant}.` });

describe('issue 21 item 5: summaries shared fairly across tenants', () => {
  it("tenant B's crossing waits at most 2 summary durations while tenant A floods 30 forced compactions", async () => {
    const summarizer = new GatedSummarizer();
    const { compactor } = compactorWith({}, { summarizer });
    const signal = new AbortController().signal;
    let settled = 0;
    const floods = Array.from({ length: 30 }, (_, number) => {
      const messages = historyOf('A', number, 6);
      return compactor
        .compact({ request: chatRequestView({ model: 'm', messages }), tenant: 'tenant-A', signal, mode: 'force' })
        .catch((error: unknown) => error)
        .finally(() => settled++);
    });
    // Every one of A's 30 is running, queued or refused (over its per-tenant limit) before B comes.
    await vi.waitFor(() => expect(summarizer.inFlight + compactor.queuedSummaries + settled).toBe(30));
    const queuedBefore = compactor.queuedSummaries;
    expect(queuedBefore).toBeGreaterThan(0);
    const messages = historyOf('B', 0, CROSSING_TURNS);
    let crossed = false;
    const crossing = compactor.compact({ request: chatRequestView({ model: 'm', messages }), tenant: 'tenant-B', signal }).finally(() => (crossed = true));
    await vi.waitFor(() => expect(compactor.queuedSummaries).toBe(queuedBefore + 1));
    const finishedBefore = summarizer.finished;
    let durations = 0;
    while (!crossed && durations < 40) {
      await vi.waitFor(() => expect(summarizer.inFlight + (crossed ? 1 : 0)).toBeGreaterThan(0));
      if (crossed) break;
      summarizer.finishOne();
      durations++;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const prepared = await crossing;
    expect(prepared.report ?? '').toMatch(/^summarized/);
    expect(summarizer.finished - finishedBefore, 'summary calls finished before B crossed').toBeLessThanOrEqual(2);
    while (summarizer.inFlight > 0 || summarizer.finished < 3) {
      summarizer.finishOne();
      await new Promise((resolve) => setTimeout(resolve, 1));
      if (summarizer.inFlight === 0) break;
    }
    await Promise.all(floods.map(async (flood) => { for (let spin = 0; spin < 100 && summarizer.inFlight > 0; spin++) { summarizer.finishOne(); await new Promise((resolve) => setTimeout(resolve, 1)); } return flood; }));
  });

  it('one tenant may have at most compaction.summary.max_queued_per_tenant summaries queued; force counts like any other', async () => {
    const summarizer = new GatedSummarizer();
    const { compactor } = compactorWith({ compaction: { summary: { max_queued_per_tenant: 3 }, on_summary_failure: 'error' } }, { summarizer });
    const signal = new AbortController().signal;
    const results = Array.from({ length: 10 }, (_, number) => {
      const messages = historyOf('A', number, 6); // below the soft threshold: only force compacts it
      return compactor.compact({ request: chatRequestView({ model: 'm', messages }), tenant: 'tenant-A', signal, mode: 'force' }).then(
        () => 'done',
        (error: unknown) => (error instanceof Error ? error.message : String(error)),
      );
    });
    await vi.waitFor(() => expect(summarizer.inFlight).toBe(1));
    const refused = await Promise.race([Promise.all(results.slice(4)), new Promise((resolve) => setTimeout(() => resolve('still waiting'), 500))]);
    expect(refused).toEqual(Array.from({ length: 6 }, () => expect.stringContaining('compaction.summary.max_queued_per_tenant')));
    for (let finished = 0; finished < 4; finished++) {
      await vi.waitFor(() => expect(summarizer.inFlight).toBe(1));
      summarizer.finishOne();
    }
    expect(await Promise.all(results.slice(0, 4))).toEqual(['done', 'done', 'done', 'done']);
  });
});

describe('a summary refused for fairness is no failure of the upstream', () => {
  it('a crossing refused by compaction.summary.max_queued_per_tenant starts no back-off: the same conversation summarizes at its next request', async () => {
    const summarizer = new GatedSummarizer();
    const { compactor } = compactorWith({ compaction: { summary: { max_queued_per_tenant: 1 }, on_summary_failure: 'error' } }, { summarizer });
    const signal = new AbortController().signal;
    const crossing = (number: number) => compactor.compact({ request: chatRequestView({ model: 'm', messages: historyOf('A', number, CROSSING_TURNS) }), tenant: 'tenant-A', signal });
    const running = crossing(0);
    await vi.waitFor(() => expect(summarizer.inFlight).toBe(1));
    const queued = crossing(1);
    await vi.waitFor(() => expect(compactor.queuedSummaries).toBe(1));
    await expect(crossing(2)).rejects.toThrow('compaction.summary.max_queued_per_tenant');
    for (let spin = 0; spin < 200 && !(summarizer.inFlight === 0 && compactor.queuedSummaries === 0 && summarizer.finished >= 2); spin++) {
      summarizer.finishOne();
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    await Promise.all([running, queued]);
    const callsBefore = summarizer.bodies.length;
    // The refused conversation again, a moment later: its summary is called, not held back by a minute's back-off.
    const again = crossing(2);
    await vi.waitFor(() => expect(summarizer.inFlight).toBe(1));
    summarizer.finishOne();
    expect((await again).report ?? '').toMatch(/^summarized/);
    expect(summarizer.bodies.length).toBeGreaterThan(callsBefore);
  });
});

describe('issue 21 item 3: the background summary queue is bounded', () => {
  it('2,500 soft-zone conversations of one tenant while the slot is busy queue at most the bound; the stalest are dropped and counted', async () => {
    const summarizer = new GatedSummarizer();
    const dropped: string[] = [];
    const { compactor } = compactorWith(
      { compaction: { summary: { max_queued_per_tenant: 1000, max_queued_background: 64 } } },
      { summarizer, observer: { compaction() {}, summary() {}, epochLookup() {}, summaryDropped: (reason: string) => dropped.push(reason) } as never },
    );
    const signal = new AbortController().signal;
    // Tenant A holds the slot with an ordinary crossing.
    const busy = historyOf('A', 0, CROSSING_TURNS);
    const holding = compactor.compact({ request: chatRequestView({ model: 'm', messages: busy }), tenant: 'tenant-A', signal });
    await vi.waitFor(() => expect(summarizer.inFlight).toBe(1));
    let started = 0;
    for (let number = 0; number < 2_500; number++) {
      const messages = historyOf('B', number, SOFT_TURNS);
      const prepared = await compactor.compact({ request: chatRequestView({ model: 'm', messages }), tenant: 'tenant-B', signal });
      if (prepared.afterResponse !== undefined) started++;
      prepared.afterResponse?.();
    }
    expect(started).toBeGreaterThan(2_400);
    // Every background summary has reached the line (queued, or dropped and finished).
    await vi.waitFor(() => expect({ queued: compactor.queuedSummaries, inFlight: summarizer.inFlight, running: compactor.runningSummaries }).toEqual({ queued: 64, inFlight: 1, running: 65 }));
    expect(dropped.length).toBe(started - 64);
    expect(new Set(dropped)).toEqual(new Set(['compaction.summary.max_queued_background']));
    // The newest are the ones kept: the next call summarizes conversation 2,499's successor set, not the first ones.
    // Let tenant A's crossing finish (its calls), then the first of B's queued summaries is called.
    const agentOf = (body: unknown) => JSON.stringify(body).match(/Agent \d+ of tenant ./)?.[0];
    for (let spin = 0; spin < 10 && !summarizer.bodies.some((body) => agentOf(body)?.endsWith('B')); spin++) {
      summarizer.finishOne();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await holding;
    expect(summarizer.bodies.map(agentOf).find((agent) => agent?.endsWith('B'))).toBe('Agent 2436 of tenant B'); // the stalest kept: 2,500 - 64
  });
});
