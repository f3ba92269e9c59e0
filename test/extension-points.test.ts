import { describe, expect, it } from 'vitest';
import { WIRE_FORMATS, type WireFormat } from '../src/formats/registry.js';
import { SseTap } from '../src/upstream/sse.js';
import { usageOfJsonText } from '../src/upstream/usage-text.js';
import { FakeUpstream } from './support/fake-upstream.js';
import { formatAt } from './support/formats.js';
import { closedAfterEachTest, startProxy } from './support/proxy.js';
import { SlotLlama } from './support/slot-llama.js';
import type { ChatMessage } from '../src/transcript/message.js';
import { headLength } from '../src/transcript/groups.js';
import { resized } from '../src/compaction/policy/compress-tier.js';
import { epochBoundary } from '../src/compaction/policy/plan.js';
import { prunedEpoch } from '../src/compaction/policy/replacement.js';
import { formatTokens } from '../src/compaction/policy/report.js';
import { BUILT_IN_TIERS, STORED_TIERS } from '../src/compaction/policy/tiers/list.js';
import { type Epoch, EpochSchema } from '../src/compaction/types.js';
import type { ModelFreeTier } from '../src/compaction/policy/tiers/tier.js';
import { send } from './support/http-client.js';
import { reReadTurn } from './support/re-reads.js';
import { SimulatedLlama } from './support/simulated-llama.js';

/**
 * Issue 35: a wire format is one extension point. A toy fourth format (a
 * copy of chat completions' adapter, served at another path, its clients
 * sending their key in a header of their own) is added through the list of
 * formats alone, and a conversation through it is compacted (a summary
 * epoch), pinned to its llama-server slot and reported (`x-compactor`, the
 * metrics, the request log) as one through chat completions is: nothing
 * outside src/formats/ asks which format a request came in.
 */

const TOY_URL = '/v1/toy/chat/completions';
const TOY_KEY_HEADER = 'x-toy-key';

const TOY_FORMAT: WireFormat = { ...formatAt('/v1/chat/completions'), urls: [TOY_URL], credentialHeaders: [TOY_KEY_HEADER] };

const track = closedAfterEachTest();

/** A coding agent's conversation at its turn `turns`: each turn the last one's history plus the answer and a long next question. */
function conversation(turns: number): string {
  const messages = [{ role: 'system', content: 'You are a coding agent.' }];
  for (let turn = 0; turn < turns; turn++) messages.push({ role: 'user', content: `toy ${turn} `.padEnd(1200, 'x') }, { role: 'assistant', content: `done ${turn}` });
  messages.push({ role: 'user', content: `toy ${turns} `.padEnd(1200, 'x') });
  return JSON.stringify({ model: 'm', messages });
}

const isSummaryCall = (body: { messages?: Array<{ content?: unknown }> }): boolean => (body.messages ?? []).some((message) => /handoff notes|earlier notes/.test(String(message.content)));

describe('issue 35: a fourth wire format is its adapter and one entry in the list of formats', () => {
  it('compacts, pins and reports a conversation through a toy format as through chat completions', async () => {
    const upstream = track(await FakeUpstream.start());
    // llama-server's chat completions, also answered at the toy path (test/support/slot-llama.ts follows the llama-server README).
    const llama = new SlotLlama(upstream, { slots: 2, window: 8000, chatAliases: [TOY_URL] });
    const proxy = track(
      await startProxy(upstream, {
        listen: true,
        config: { upstream: { slots: 'auto' }, compaction: { enabled: true } },
        deps: { formats: [...WIRE_FORMATS, TOY_FORMAT] },
      }),
    );

    const reports: Array<string | null> = [];
    for (let turn = 0; turn < 24; turn++) {
      const response = await fetch(`${proxy.url}${TOY_URL}`, { method: 'POST', headers: { 'content-type': 'application/json', [TOY_KEY_HEADER]: 'toy-secret' }, body: conversation(turn) });
      expect(response.status).toBe(200);
      await response.arrayBuffer();
      reports.push(response.headers.get('x-compactor'));
    }

    // Compacted: a summary epoch was made, and later turns went upstream with it in place of the old turns.
    const forwarded = upstream.requestsTo(TOY_URL).map((request) => request.json as { id_slot?: unknown; messages: Array<{ content: unknown }> });
    expect(forwarded).toHaveLength(24);
    const compacted = forwarded.map((body) => body.messages.some((message) => String(message.content).startsWith('[compacted:summary]')));
    expect(compacted.filter(Boolean).length).toBeGreaterThan(0);
    const summaries = upstream.requestsTo('/v1/chat/completions').filter((request) => isSummaryCall(request.json as { messages?: Array<{ content?: unknown }> }));
    expect(summaries.length).toBeGreaterThan(0);
    // The summary call carries the client's key, read from the toy format's own header.
    for (const summary of summaries) expect(summary.headers.authorization).toBe('Bearer toy-secret');

    // Pinned: every turn of the one conversation went to the same llama-server slot.
    const slots = new Set(forwarded.map((body) => body.id_slot));
    expect([...slots]).toEqual([expect.any(Number)]);
    expect(llama.model.counters.busyPins).toBe(0);

    // Reported: the header said what was done, the metrics counted it, the log line names the slot.
    // Each turn sent with the summary in place says so in its header (`epoch reused (6.0k -> 1.9k tokens)`, or the summary made for it).
    for (const [turn, report] of reports.entries()) if (compacted[turn] === true) expect(report, `turn ${turn}`).toMatch(/^(epoch reused|summarized)/);
    const metrics = await (await fetch(`${proxy.url}/metrics`)).text();
    // The summary is made ahead of need (prepared) or when the turn cannot wait (compacted), as the engine decides for chat.
    expect(metrics).toMatch(/compactor_compactions_total\{[^}]*tier="summary",outcome="(?:prepared|compacted)"\} [1-9]/);
    expect(metrics).toMatch(/compactor_epoch_lookups_total\{result="hit"\} [1-9]/);
    expect(metrics).toContain('compactor_requests_total{route="chat",status="200"} 24');
    // The toy answers' usage was read in the format's words: the forwarded prompt tokens were counted from it.
    expect(metrics).toMatch(/compactor_forwarded_prompt_tokens_total\{[^}]*\} [1-9]/);
    const line = await proxy.logs.request((entry) => entry['route'] === 'chat' && entry['path'] === TOY_URL);
    expect(line['slot']).toEqual([...slots][0]);
  });

  it('has its answers read in its own words: the usage key and fields, and the error event of its stream', () => {
    // Words of Gemini's generateContent (https://ai.google.dev/api/generate-content#UsageMetadata): usage is `usageMetadata`,
    // the prompt `promptTokenCount`, the answer `candidatesTokenCount`; a failure is an `{"error": …}` body.
    const words = {
      key: 'usageMetadata',
      within: [],
      read: (value: unknown) => {
        const usage = value as { promptTokenCount?: unknown; candidatesTokenCount?: unknown };
        return typeof usage.promptTokenCount === 'number' ? { prompt_tokens: usage.promptTokenCount, ...(typeof usage.candidatesTokenCount === 'number' ? { completion_tokens: usage.candidatesTokenCount } : {}) } : undefined;
      },
    };
    const gemini: WireFormat = { ...TOY_FORMAT, usage: words, streamEnd: { events: new Set(), error: /^\{\s*"error"\s*:/ } };
    const tap = new SseTap(gemini, { collectUsage: true });
    tap.write(Buffer.from('data: {"candidates":[],"usageMetadata":{"promptTokenCount":41,"candidatesTokenCount":3}}\n\n'));
    expect(tap.usage).toEqual({ prompt_tokens: 41, completion_tokens: 3 });
    expect(tap.sawError).toBe(false);
    tap.write(Buffer.from('data: {"error":{"code":503,"message":"overloaded"}}\n\n'));
    expect(tap.errorStatus).toBe(503);
    expect(usageOfJsonText('{"candidates":[],"usageMetadata":{"promptTokenCount":7}}', words)).toEqual({ usage: { prompt_tokens: 7 } });
    // Chat completions' words find nothing there.
    expect(usageOfJsonText('{"candidates":[],"usageMetadata":{"promptTokenCount":7}}', formatAt('/v1/chat/completions').usage)).toBeUndefined();
  });

  it('serves the registered formats alone when none is added', async () => {
    const upstream = track(await FakeUpstream.start());
    new SlotLlama(upstream, { slots: 1, chatAliases: [TOY_URL] });
    const proxy = track(await startProxy(upstream, { listen: true }));
    const response = await fetch(`${proxy.url}${TOY_URL}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: conversation(0) });
    await response.arrayBuffer();
    // Not a chat route: passed through as any other path, never read, planned or pinned.
    expect(upstream.requestsTo(TOY_URL)[0]!.body.toString()).toBe(conversation(0));
    const line = await proxy.logs.request((entry) => entry['path'] === TOY_URL);
    expect(line['route']).not.toBe('chat');
  });
});

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
    const upstream = track(await FakeUpstream.start());
    new SimulatedLlama(upstream, { window: 8192 });
    const proxy = track(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true } }, deps: { tiers: TIERS } }));
    const steps = await converse(proxy.url, upstream, 10);

    const first = steps.findIndex((step) => step.report?.startsWith('elided') === true);
    expect(first, steps.map((step) => step.report).join('\n')).toBeGreaterThan(0);
    // Then what the server spent on the answer (issue 36).
    expect(steps[first]!.report).toMatch(/^elided \d+ tool results \(\d+(\.\d)?k? -> \d+(\.\d)?k? tokens\); server \d+\.\d\d s prefill, \d+\.\d\d s decode$/);
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
    const upstream = track(await FakeUpstream.start());
    new SimulatedLlama(upstream, { window: 8192 });
    const proxy = track(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true, mode: 'observe' } }, deps: { tiers: TIERS } }));
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
