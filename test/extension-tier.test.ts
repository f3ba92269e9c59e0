import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../src/transcript/message.js';
import { headLength } from '../src/transcript/groups.js';
import { resized } from '../src/compaction/policy/compress-tier.js';
import { epochBoundary } from '../src/compaction/policy/plan.js';
import { prunedEpoch } from '../src/compaction/policy/replacement.js';
import { formatTokens } from '../src/compaction/policy/report.js';
import { BUILT_IN_TIERS, STORED_TIERS } from '../src/compaction/policy/tiers/list.js';
import { type Epoch, EpochSchema } from '../src/compaction/types.js';
import type { ModelFreeTier } from '../src/compaction/policy/tiers/tier.js';
import { FakeUpstream } from './support/fake-upstream.js';
import { send } from './support/http-client.js';
import { closedAfterEachTest, startProxy } from './support/proxy.js';
import { reReadTurn } from './support/re-reads.js';
import { SimulatedLlama } from './support/simulated-llama.js';

/**
 * Issue 35: a new compaction tier is one file and one line in the tier list.
 * Here the file is this test's `elideTier` and the line is the list given to
 * the app (`deps.tiers`), nothing else: a conversation through it is
 * compacted (its epoch written, then replayed byte for byte), reported in
 * `x-compactor` and counted under its name in /metrics and on the dashboard,
 * as the built-in tiers are.
 */

const ELIDED = '[elided by the toy tier]';

interface ElidePlan {
  readonly tier: 'elide';
  readonly cut: number;
  readonly messages: ChatMessage[];
  readonly results: number;
  readonly size: number;
}

const elidedLine = (plan: ElidePlan, before: number): string => `elided ${plan.results} tool results (${formatTokens(before)} -> ${formatTokens(plan.size)} tokens)`;

// A shared store's schema knows the built-in tiers only: an epoch of a list given at run time is a memory store's.
/** A toy tier, no model call: every tool result before the turn cut replaced by a fixed line. */
const elideTier: ModelFreeTier<ElidePlan> = {
  name: 'elide',
  shownAs: 'elide',
  needsModel: false,
  plan({ candidate, sizes, trigger, sizeOf, total, cut }) {
    if (cut === null || trigger !== 'size') return null;
    const { messages } = candidate;
    const head = headLength(messages);
    const elided = messages.map((message, index) => (index >= head && index < cut && message.role === 'tool' && message.content !== ELIDED ? { ...message, content: ELIDED } : message));
    const { size, changed } = resized(messages, elided, sizes, total, { from: head, to: cut }, sizeOf);
    return changed === 0 ? null : { tier: 'elide', cut, messages: elided, results: changed, size };
  },
  settles: () => true,
  boundaryOf: (candidate, plan) => epochBoundary(candidate, plan.cut),
  epochOf: (hashes, candidate, { plan, boundary }, before) => prunedEpoch(hashes, candidate, plan.messages, boundary, elidedLine(plan, before), { tier: 'elide' as Epoch['strategy'], seesWholeHistory: false }),
  wouldLine: ({ plan }, before) => `would ${elidedLine(plan, before).replace(/^elided/, 'elide')}`,
};

/** The one line: the toy tier first, so it is the one a crossing takes. */
const TIERS = [elideTier, ...BUILT_IN_TIERS];

const opened = closedAfterEachTest();

/** Sends the re-read agent loop turn by turn; returns each answer's `x-compactor` and the messages the upstream received for it. */
async function converse(url: string, upstream: FakeUpstream, turns: number, until?: (report: string | null) => boolean): Promise<Array<{ report: string | null; forwarded: unknown[] }>> {
  let history: ChatMessage[] = [{ role: 'system', content: 'You are a careful coding agent.' }];
  const steps: Array<{ report: string | null; forwarded: unknown[] }> = [];
  for (let turn = 1; turn <= turns; turn++) {
    const messages = reReadTurn(turn);
    history = [...history, messages[0]!];
    const response = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'sim', messages: history }) });
    expect(response.status, steps.map((step) => step.report).join('\n')).toBe(200);
    await response.text();
    const received = upstream.requestsTo('/v1/chat/completions').at(-1)!.json as { messages: unknown[] };
    steps.push({ report: response.headers.get('x-compactor'), forwarded: received.messages });
    if (until?.(steps.at(-1)!.report) === true) break;
    history = [...history, ...messages.slice(1)];
  }
  return steps;
}

describe('a compaction tier added through the tier list alone', () => {
  it('compacts a conversation, replays its epoch byte for byte, and is reported and counted under its name', async () => {
    const upstream = opened(await FakeUpstream.start());
    new SimulatedLlama(upstream, { window: 8192 });
    const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true } }, deps: { tiers: TIERS } }));
    const steps = await converse(proxy.url, upstream, 10);

    const first = steps.findIndex((step) => step.report?.startsWith('elided') === true);
    expect(first, steps.map((step) => step.report).join('\n')).toBeGreaterThan(0);
    expect(steps[first]!.report).toMatch(/^elided \d+ tool results \(\d+(\.\d)?k? -> \d+(\.\d)?k? tokens\)$/);
    const compacted = steps[first]!.forwarded;
    expect(JSON.stringify(compacted)).toContain(ELIDED);
    // The next request forwards the elided prefix as it was, byte for byte (the epoch replayed, not planned again).
    const next = steps[first + 1]!;
    expect(JSON.stringify(next.forwarded.slice(0, compacted.length - 1))).toBe(JSON.stringify(compacted.slice(0, -1)));
    expect(next.report).toMatch(/^epoch reused|^elided/);

    const metrics = (await send(`${proxy.url}/metrics`)).body.toString('utf8');
    expect(metrics).toMatch(/compactor_compactions_total\{model="sim",tier="elide",outcome="compacted"\} [1-9]/);
    const state = JSON.parse((await send(`${proxy.url}/dashboard/state`)).body.toString('utf8')) as { conversations: Array<{ tiers: Record<string, number> }>; compactions: Array<{ tier: string }> };
    expect(state.conversations[0]!.tiers['elide']).toBeGreaterThan(0);
    expect(state.compactions.some((event) => event.tier === 'elide')).toBe(true);
  });

  it('says in observe mode what it would do, in its own words, and counts it', async () => {
    const upstream = opened(await FakeUpstream.start());
    new SimulatedLlama(upstream, { window: 8192 });
    const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true, mode: 'observe' } }, deps: { tiers: TIERS } }));
    // Until it would elide: observe mode forwards the whole history, which soon outgrows the window.
    const steps = await converse(proxy.url, upstream, 10, (report) => report?.startsWith('observe: would elide') === true);
    expect(steps.at(-1)!.report, steps.map((step) => step.report).join('\n')).toMatch(/^observe: would elide \d+ tool results \(/);
    // Nothing is done: the upstream receives the client's messages.
    expect(steps.every((step) => !JSON.stringify(step.forwarded).includes(ELIDED))).toBe(true);
    const metrics = (await send(`${proxy.url}/metrics`)).body.toString('utf8');
    expect(metrics).toMatch(/compactor_compactions_total\{model="sim",tier="elide",outcome="observed"\} [1-9]/);
  });

  it("the stored epoch's tier names are the built-in list's, and truncated", () => {
    expect([...EpochSchema.shape.strategy.options].sort()).toEqual([...STORED_TIERS].sort());
  });
});
