import { describe, expect, it } from 'vitest';
import { WIRE_FORMATS, type WireFormat } from '../src/formats/registry.js';
import { SseTap } from '../src/upstream/sse.js';
import { usageOfJsonText } from '../src/upstream/usage-text.js';
import { FakeUpstream } from './support/fake-upstream.js';
import { formatAt } from './support/formats.js';
import { closedAfterEachTest, startProxy } from './support/proxy.js';
import { SlotLlama } from './support/slot-llama.js';

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
