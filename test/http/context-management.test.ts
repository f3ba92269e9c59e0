import Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { type FakeExchange, FakeUpstream, replies } from '../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';
import { SimulatedLlama } from '../support/simulated-llama.js';
import { MESSAGE_ANSWER, STREAM_EVENTS } from '../support/messages-answers.js';

/**
 * Issue 38 item 2: Anthropic's `context_management` on `/v1/messages`, served
 * for a local model, through the real `@anthropic-ai/sdk` (its beta client).
 *
 * What Anthropic documents, and these tests hold compactor to:
 * - docs.claude.com/en/docs/build-with-claude/context-editing (beta header
 *   `context-management-2025-06-27`): `clear_tool_uses_20250919` with
 *   `trigger` (default input_tokens 100,000), `keep` (default 3 tool_uses),
 *   `clear_at_least`, `exclude_tools`, `clear_tool_inputs`; and
 *   `clear_thinking_20251015` with `keep` (default 1 thinking_turns). The
 *   answer reports `context_management.applied_edits` (`cleared_tool_uses`,
 *   `cleared_thinking_turns`, `cleared_input_tokens`); a stream on its
 *   `message_delta` event (the SDK's `BetaRawMessageDeltaEvent.context_management`).
 * - platform.claude.com/docs/en/build-with-claude/compaction (beta
 *   `compact-2026-01-12`): `compact_20260112` with `trigger` (default
 *   150,000), `pause_after_compaction` and `instructions`; past the trigger
 *   the answer carries a `{type: "compaction", content}` block first, a
 *   paused one that block alone with `stop_reason: "compaction"`, and a
 *   later request carrying the block is read from it on (what came before
 *   it is dropped).
 *
 * The upstream is the llama-server double: `/props` and the summaries of
 * the simulated llama-server (test/support/simulated-llama.ts), and its
 * `/v1/messages` (llama-server's README: "Anthropic Messages API compatible
 * chat completions", answering in Anthropic's shape) recorded here. No local
 * server knows `context_management`: before this, compactor forwarded it and
 * the answer carried no `applied_edits` and no `compaction` block.
 */

const opened = closedAfterEachTest();

const TOOLS = [
  { name: 'read_file', description: 'Reads a file', input_schema: { type: 'object' as const, properties: { path: { type: 'string' } } } },
  { name: 'bash', description: 'Runs a command', input_schema: { type: 'object' as const, properties: { command: { type: 'string' } } } },
];

interface Setup {
  readonly upstream: FakeUpstream;
  readonly llama: SimulatedLlama;
  readonly client: Anthropic;
  readonly url: string;
}

async function started(config: Record<string, unknown> = {}): Promise<Setup> {
  const upstream = opened(await FakeUpstream.start());
  // /props (an 8k window) and summaries through chat completions: the simulated llama-server's.
  const llama = new SimulatedLlama(upstream, { window: 8192 });
  // Its usage counts the prompt it got as the simulated llama-server's tokenizer does (what compactor learns its ratio from).
  upstream.route('POST', '/v1/messages', (exchange: FakeExchange) => {
    const inputTokens = Math.round(exchange.request.body.length * llama.tokensPerByte);
    if ((exchange.request.json as { stream?: boolean }).stream !== true) return replies.json(200, { ...MESSAGE_ANSWER, usage: { input_tokens: inputTokens, output_tokens: 2 } })(exchange);
    return replies.sse(STREAM_EVENTS.map((event) => event.replaceAll('"input_tokens":12', `"input_tokens":${inputTokens}`)))(exchange);
  });
  const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true }, ...config } }));
  const client = new Anthropic({ baseURL: proxy.url, apiKey: 'sk-ant-test', maxRetries: 0 });
  return { upstream, llama, client, url: proxy.url };
}

type Message = { role: 'user' | 'assistant'; content: unknown };

/** An agent loop: `uses` tool uses, each result `chars` long and naming its use, the tool of each from `toolOf`. */
function toolLoop(uses: number, chars = 1200, toolOf: (use: number) => string = () => 'read_file'): Message[] {
  const messages: Message[] = [{ role: 'user', content: 'Read the files and fix the bug.' }];
  for (let use = 0; use < uses; use++) {
    const name = toolOf(use);
    const input = name === 'bash' ? { command: `cat f${use}.txt` } : { path: `f${use}.txt` };
    messages.push({ role: 'assistant', content: [{ type: 'text', text: `Step ${use}.` }, { type: 'tool_use', id: `toolu_${use}`, name, input }] });
    messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: `toolu_${use}`, content: `result ${use}: ${'x'.repeat(chars)}` }] });
  }
  return messages;
}

/** The agent loop of 10 tool uses asked with the edit the tests start from: past 2,000 input tokens, clear all tool results but the newest `keep` (the edit's own default without it). */
function clearingRequest(keep?: number) {
  const edit: Anthropic.Beta.BetaClearToolUses20250919Edit = { type: 'clear_tool_uses_20250919', trigger: { type: 'input_tokens', value: 2000 }, ...(keep === undefined ? {} : { keep: { type: 'tool_uses', value: keep } }) };
  return { model: 'sim', tools: TOOLS, context_management: { edits: [edit] }, messages: toolLoop(10) as never };
}

type Sent = { messages: Array<{ role: string; content: unknown }>; context_management?: unknown };

function lastSent(upstream: FakeUpstream): Sent {
  return upstream.requestsTo('/v1/messages').at(-1)!.json as Sent;
}

/** The forwarded tool results, by tool_use_id, as text. */
function resultsOf(sent: Sent): Map<string, string> {
  const results = new Map<string, string>();
  for (const message of sent.messages) {
    if (!Array.isArray(message.content)) continue;
    for (const block of message.content as Array<Record<string, unknown>>) {
      if (block['type'] === 'tool_result') results.set(String(block['tool_use_id']), typeof block['content'] === 'string' ? block['content'] : JSON.stringify(block['content']));
    }
  }
  return results;
}

const CLEARED = /^\[compressed: an older (read_file|bash) result was cleared \(\d+ bytes\); it is nowhere else in this conversation: call \1 again for it\]$/;

describe('issue 38 item 2: clear_tool_uses_20250919', () => {
  it('past its trigger, all but the newest `keep` tool results are cleared with a true marker, and applied_edits says how many', async () => {
    const { upstream, client } = await started();
    const response = await client.beta.messages
      .create({ ...clearingRequest(3), max_tokens: 64, betas: ['context-management-2025-06-27'] })
      .withResponse();
    const sent = lastSent(upstream);
    // Never forwarded: no local server knows it.
    expect(sent.context_management).toBeUndefined();
    expect(upstream.requestsTo('/v1/messages').at(-1)!.body.toString()).not.toContain('context_management');
    const results = resultsOf(sent);
    for (let use = 0; use < 7; use++) expect(results.get(`toolu_${use}`)).toMatch(CLEARED);
    for (let use = 7; use < 10; use++) expect(results.get(`toolu_${use}`)).toMatch(new RegExp(`^result ${use}: x{1200}$`));
    const applied = response.data.context_management?.applied_edits;
    expect(applied).toHaveLength(1);
    expect(applied![0]).toMatchObject({ type: 'clear_tool_uses_20250919', cleared_tool_uses: 7 });
    expect((applied![0] as { cleared_input_tokens: number }).cleared_input_tokens).toBeGreaterThan(7 * 250);
    // The log line's words: a compression, as every tier reports.
    expect(response.response.headers.get('x-compactor')).toMatch(/^compressed 7 tool results \(clear_tool_uses: 7 cleared; [\d.k]+ -> [\d.k]+ tokens\)$/);
    expect(response.data.content).toEqual([{ type: 'text', text: 'Done.' }]);
  });

  it('is decided once per epoch: the next turn forwards the same cleared prefix byte for byte, and still reports what the prompt holds cleared', async () => {
    const { upstream, client } = await started();
    // Cleared, the conversation is well under its trigger: the next turn does not cross it again.
    const edits = { edits: [{ type: 'clear_tool_uses_20250919' as const, trigger: { type: 'input_tokens' as const, value: 3000 } }] };
    const history = toolLoop(10);
    await client.beta.messages.create({ model: 'sim', max_tokens: 64, tools: TOOLS, betas: ['context-management-2025-06-27'], context_management: edits, messages: history as never });
    const first = upstream.requestsTo('/v1/messages').at(-1)!.body.toString();
    history.push({ role: 'assistant', content: [{ type: 'text', text: 'Step 10.' }, { type: 'tool_use', id: 'toolu_10', name: 'read_file', input: { path: 'f10.txt' } }] });
    history.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_10', content: 'result 10: short' }] });
    const second = await client.beta.messages.create({ model: 'sim', max_tokens: 64, tools: TOOLS, betas: ['context-management-2025-06-27'], context_management: edits, messages: history as never });
    const sentSecond = upstream.requestsTo('/v1/messages').at(-1)!.body.toString();
    const firstMessages = first.slice(first.indexOf('"messages":'));
    // The first request's messages, bytes unchanged, then the new turn.
    expect(sentSecond).toContain(firstMessages.slice(0, firstMessages.lastIndexOf(']')));
    // Default keep (3): the 7 cleared then are still the only ones cleared; toolu_7 stays raw though it is now 4th newest.
    expect(resultsOf(lastSent(upstream)).get('toolu_7')).toMatch(/^result 7: x{1200}$/);
    expect(second.context_management?.applied_edits).toEqual([expect.objectContaining({ type: 'clear_tool_uses_20250919', cleared_tool_uses: 7 })]);
  });

  it('keeps the uses of exclude_tools, clears the inputs of the uses it clears (clear_tool_inputs), and counts tool uses as its trigger', async () => {
    const { upstream, client } = await started();
    const answer = await client.beta.messages.create({
      model: 'sim',
      max_tokens: 64,
      tools: TOOLS,
      betas: ['context-management-2025-06-27'],
      context_management: {
        edits: [{ type: 'clear_tool_uses_20250919', trigger: { type: 'tool_uses', value: 6 }, keep: { type: 'tool_uses', value: 2 }, exclude_tools: ['bash'], clear_tool_inputs: true }],
      },
      messages: toolLoop(8, 300, (use) => (use % 2 === 0 ? 'bash' : 'read_file')) as never,
    });
    const sent = lastSent(upstream);
    const results = resultsOf(sent);
    // bash (even uses) is never cleared, nor counted; of read_file's (1, 3, 5, 7) all but the newest 2 (5 and 7) are.
    for (const use of [0, 2, 4, 6]) expect(results.get(`toolu_${use}`)).toMatch(/^result \d: x{300}$/);
    for (const use of [1, 3]) expect(results.get(`toolu_${use}`)).toMatch(CLEARED);
    for (const use of [5, 7]) expect(results.get(`toolu_${use}`)).toMatch(new RegExp(`^result ${use}: x{300}$`));
    const inputs = new Map(sent.messages.flatMap((message) => (Array.isArray(message.content) ? (message.content as Array<Record<string, unknown>>) : [])).filter((block) => block['type'] === 'tool_use').map((block) => [block['id'], block['input']]));
    for (const use of [1, 3]) expect(inputs.get(`toolu_${use}`)).toEqual({ cleared_input: expect.stringMatching(/^\[compressed: the input of this read_file call was cleared with its result \(\d+ bytes\); it is nowhere else in this conversation\]$/) });
    expect(inputs.get('toolu_5')).toEqual({ path: 'f5.txt' });
    expect(inputs.get('toolu_0')).toEqual({ command: 'cat f0.txt' });
    expect(answer.context_management?.applied_edits).toEqual([expect.objectContaining({ type: 'clear_tool_uses_20250919', cleared_tool_uses: 2 })]);
  });

  it('clears nothing when it cannot free clear_at_least, and nothing under its trigger', async () => {
    const { upstream, client } = await started();
    for (const edit of [
      { type: 'clear_tool_uses_20250919' as const, trigger: { type: 'input_tokens' as const, value: 2000 }, clear_at_least: { type: 'input_tokens' as const, value: 100_000 } },
      // The default trigger, 100,000 input tokens, is far above this conversation.
      { type: 'clear_tool_uses_20250919' as const },
    ]) {
      const answer = await client.beta.messages.create({ model: 'sim', max_tokens: 64, tools: TOOLS, betas: ['context-management-2025-06-27'], context_management: { edits: [edit] }, messages: toolLoop(10) as never });
      for (const [, text] of resultsOf(lastSent(upstream))) expect(text).toMatch(/^result \d+: x{1200}$/);
      expect(answer.context_management).toEqual({ applied_edits: [] });
      expect(lastSent(upstream).context_management).toBeUndefined();
    }
  });

  it('streamed: applied_edits rides on message_delta and the SDK puts it on the final message', async () => {
    const { upstream, client, url } = await started();
    const stream = client.beta.messages.stream({ ...clearingRequest(4), max_tokens: 64, betas: ['context-management-2025-06-27'] });
    const final = await stream.finalMessage();
    expect(final.content).toMatchObject([{ type: 'text', text: 'Done.' }]);
    expect(final.context_management?.applied_edits).toEqual([expect.objectContaining({ type: 'clear_tool_uses_20250919', cleared_tool_uses: 6 })]);
    expect(resultsOf(lastSent(upstream)).get('toolu_5')).toMatch(CLEARED);
    // The rest of the stream as the upstream wrote it.
    const raw = await fetch(`${url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'anthropic-beta': 'context-management-2025-06-27' },
      body: JSON.stringify({ ...clearingRequest(), max_tokens: 8, stream: true }),
    });
    const text = await raw.text();
    expect(text.startsWith('event: message_start\n')).toBe(true);
    expect(text).toContain(STREAM_EVENTS.slice(1, 4).join(''));
    expect(text).toContain('"context_management":{"applied_edits":[{"type":"clear_tool_uses_20250919","cleared_tool_uses":7,');
    expect(text.endsWith(STREAM_EVENTS.at(-1)!)).toBe(true);
  });
});

describe('issue 38 item 2: a stream split anywhere', () => {
  it('is edited frame by frame whatever its chunks: the compaction block and applied_edits as when whole, every other byte as it came', async () => {
    const { upstream, client } = await started();
    // The upstream writes its stream in pieces of 7 bytes: frames and UTF-8 characters cut across chunks.
    const events = STREAM_EVENTS.map((event) => event.replace('"text":"Do"', '"text":"Dö"'));
    upstream.route('POST', '/v1/messages', replies.sse(events, { chunkBytes: 7 }));
    const stream = client.beta.messages.stream({
      model: 'sim',
      max_tokens: 64,
      tools: TOOLS,
      betas: ['context-management-2025-06-27', 'compact-2026-01-12'],
      context_management: { edits: [{ type: 'clear_thinking_20251015' }, compactEdit({ trigger: { type: 'input_tokens', value: 3000 } })] },
      messages: chat(30) as never,
    });
    const final = await stream.finalMessage();
    expect((final.content as unknown as Array<{ type: string }>).map((block) => block.type)).toEqual(['compaction', 'text']);
    expect(final.content[1]).toMatchObject({ type: 'text', text: 'Döne.' });
    expect(final.context_management).toEqual({ applied_edits: [] });
  });
});

describe('issue 38 item 2: clear_thinking_20251015', () => {
  it('clears the thinking of all but the last `keep` assistant turns and reports the turns cleared', async () => {
    const { upstream, client } = await started();
    const messages = [
      { role: 'user', content: 'Plan it.' },
      { role: 'assistant', content: [{ type: 'thinking', thinking: 'first thoughts '.repeat(40), signature: 's1' }, { type: 'text', text: 'Plan A.' }] },
      { role: 'user', content: 'Go on.' },
      { role: 'assistant', content: [{ type: 'thinking', thinking: 'second thoughts '.repeat(40), signature: 's2' }, { type: 'text', text: 'Plan B.' }] },
      { role: 'user', content: 'And then?' },
      { role: 'assistant', content: [{ type: 'thinking', thinking: 'third thoughts', signature: 's3' }, { type: 'text', text: 'Plan C.' }] },
      { role: 'user', content: 'Finish.' },
    ];
    const answer = await client.beta.messages.create({
      model: 'sim',
      max_tokens: 64,
      betas: ['context-management-2025-06-27'],
      context_management: { edits: [{ type: 'clear_thinking_20251015', keep: { type: 'thinking_turns', value: 1 } }] },
      messages: messages as never,
    });
    const sent = lastSent(upstream);
    expect(sent.messages[1]!.content).toEqual([{ type: 'text', text: 'Plan A.' }]);
    expect(sent.messages[3]!.content).toEqual([{ type: 'text', text: 'Plan B.' }]);
    expect(sent.messages[5]!.content).toEqual([{ type: 'thinking', thinking: 'third thoughts', signature: 's3' }, { type: 'text', text: 'Plan C.' }]);
    expect(sent.context_management).toBeUndefined();
    expect(answer.context_management?.applied_edits).toEqual([{ type: 'clear_thinking_20251015', cleared_thinking_turns: 2, cleared_input_tokens: expect.any(Number) }]);
    expect((answer.context_management!.applied_edits[0] as { cleared_input_tokens: number }).cleared_input_tokens).toBeGreaterThan(250);
    // keep "all": nothing cleared, the body forwarded as it came but for the field only compactor reads.
    await client.beta.messages.create({ model: 'sim', max_tokens: 64, betas: ['context-management-2025-06-27'], context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] }, messages: messages as never });
    expect(lastSent(upstream).messages).toEqual(messages);
  });
});

/** The compaction edit: the SDK's types (0.71) do not have it yet, so it goes untyped. */
function compactEdit(fields: Record<string, unknown>): never {
  return { type: 'compact_20260112', ...fields } as never;
}

/** A chat of `turns` user turns, each planting a fact the simulated summary lists. */
function chat(turns: number): Message[] {
  const messages: Message[] = [];
  for (let turn = 0; turn < turns; turn++) {
    messages.push({ role: 'user', content: `Turn ${turn}: remember FACT-${turn}-${'q'.repeat(4)} and ${'context '.repeat(60)}` });
    if (turn < turns - 1) messages.push({ role: 'assistant', content: `Noted ${turn}.` });
  }
  return messages;
}

describe('issue 38 item 2: compact_20260112', () => {
  it('past its trigger the answer carries a compaction block with the notes; a follow-up carrying it is read from it on', async () => {
    const { upstream, llama, client } = await started();
    const history = chat(30);
    const answer = await client.beta.messages.create({
      model: 'sim',
      max_tokens: 64,
      betas: ['compact-2026-01-12'],
      context_management: { edits: [compactEdit({ trigger: { type: 'input_tokens', value: 3000 } })] },
      messages: history as never,
    });
    expect(llama.summaryRecords).toHaveLength(1);
    const content = answer.content as unknown as Array<Record<string, unknown>>;
    expect(content[0]).toEqual({ type: 'compaction', content: expect.stringMatching(/^NOTES: FACT-0 FACT-1 /) });
    expect(content.slice(1)).toEqual([{ type: 'text', text: 'Done.' }]);
    const notes = content[0]!['content'] as string;
    const compacted = lastSent(upstream);
    expect(compacted.context_management).toBeUndefined();
    // The whole conversation summarized but the current turn, as Anthropic's compaction does.
    expect(compacted.messages).toEqual([
      { role: 'user', content: `[compacted:summary] ${notes}` },
      { role: 'assistant', content: '[compacted:summary] Understood; continuing from these notes.' },
      history.at(-1),
    ]);

    // The client appends the answer, compaction block and all, and goes on.
    history.push({ role: 'assistant', content: answer.content }, { role: 'user', content: 'Turn 30: and now?' });
    const followUp = await client.beta.messages.create({
      model: 'sim',
      max_tokens: 64,
      betas: ['compact-2026-01-12'],
      context_management: { edits: [compactEdit({ trigger: { type: 'input_tokens', value: 3000 } })] },
      messages: history as never,
    });
    const sent = lastSent(upstream);
    // Read from the block on: its notes, the rest of its message, the new turn; nothing from before it, no block forwarded.
    expect(sent.messages).toEqual([
      { role: 'user', content: `[compacted:summary] ${notes}` },
      { role: 'assistant', content: [{ type: 'text', text: 'Done.' }] },
      { role: 'user', content: 'Turn 30: and now?' },
    ]);
    expect(llama.summaryRecords).toHaveLength(1);
    expect((followUp.content as unknown as Array<{ type: string }>).map((block) => block.type)).toEqual(['text']);
  });

  it('pause_after_compaction: the answer is the compaction block alone, stop_reason "compaction", the model not asked; instructions are the summary prompt', async () => {
    const { upstream, llama, client } = await started();
    const instructions = 'Summarize only the facts, as a list.';
    const answer = await client.beta.messages.create({
      model: 'sim',
      max_tokens: 64,
      betas: ['compact-2026-01-12'],
      context_management: { edits: [compactEdit({ trigger: { type: 'input_tokens', value: 3000 }, pause_after_compaction: true, instructions })] },
      messages: chat(30) as never,
    });
    expect(upstream.requestsTo('/v1/messages')).toHaveLength(0);
    expect(answer.stop_reason as string).toBe('compaction');
    expect(answer.content).toEqual([{ type: 'compaction', content: expect.any(String) }]);
    // The summary call ended with the client's instructions in place of compactor's ask.
    const summaryCall = upstream.requestsTo('/v1/chat/completions').at(-1)!.json as { messages: Array<{ content: string }> };
    expect(summaryCall.messages.at(-1)!.content).toBe(instructions);
    // The notes are what the summary call answered: the simulated llama-server answers an ask it does not know as a chat turn.
    expect(llama.records.at(-1)!.kind).toBe('chat');
    expect((answer.content[0] as unknown as { content: string }).content).toBe('Done.');
  });

  it('streamed: the compaction block comes first, the model\'s blocks one index later, and paused, the stream is the block alone', async () => {
    const { client } = await started();
    const stream = client.beta.messages.stream({
      model: 'sim',
      max_tokens: 64,
      betas: ['compact-2026-01-12'],
      context_management: { edits: [compactEdit({ trigger: { type: 'input_tokens', value: 3000 } })] },
      messages: chat(30) as never,
    });
    const indexes: number[] = [];
    stream.on('streamEvent', (event) => {
      if (event.type === 'content_block_start') indexes.push(event.index);
    });
    const final = await stream.finalMessage();
    expect(indexes).toEqual([0, 1]);
    expect((final.content as unknown as Array<Record<string, unknown>>).map((block) => block['type'])).toEqual(['compaction', 'text']);
    expect((final.content[0] as unknown as { content: string }).content).toMatch(/^NOTES: FACT-0 FACT-1 /);
    expect(final.content[1]).toMatchObject({ type: 'text', text: 'Done.' });

    const paused = await client.beta.messages
      .stream({
        model: 'sim',
        max_tokens: 64,
        betas: ['compact-2026-01-12'],
        context_management: { edits: [compactEdit({ trigger: { type: 'input_tokens', value: 3000 }, pause_after_compaction: true })] },
        // Another conversation: the one above is compacted already, and a compaction made earlier is no reason to pause.
        system: 'Another conversation.',
        messages: chat(30) as never,
      })
      .finalMessage();
    expect(paused.stop_reason as string).toBe('compaction');
    expect((paused.content as unknown as Array<Record<string, unknown>>).map((block) => block['type'])).toEqual(['compaction']);
  });
});

describe('issue 38 item 2: a malformed edit', () => {
  it("gets a 400 in Anthropic's error shape naming the field, and nothing is forwarded", async () => {
    const { upstream, client } = await started();
    const cases: Array<[unknown, string]> = [
      [{ edits: [{ type: 'clear_tool_uses_20250919', keep: { type: 'tool_uses', value: -1 } }] }, 'context_management.edits[0].keep.value: must be an integer of at least 0'],
      [{ edits: [{ type: 'clear_tool_uses_20250919', trigger: { type: 'messages', value: 3 } }] }, 'context_management.edits[0].trigger.type: must be "input_tokens" or "tool_uses"'],
      [{ edits: [{ type: 'clear_thinking_20251015' }, { type: 'clear_everything' }] }, 'context_management.edits[1].type: must be one of "clear_tool_uses_20250919", "clear_thinking_20251015", "compact_20260112"'],
      [{ edits: [{ type: 'compact_20260112', pause_after_compaction: 'yes' }] }, 'context_management.edits[0].pause_after_compaction: must be a boolean'],
      [{ edits: [{ type: 'clear_tool_uses_20250919', exclude: ['bash'] }] }, 'context_management.edits[0].exclude: is not a field of this object'],
    ];
    for (const [contextManagement, message] of cases) {
      const failure = await client.beta.messages
        .create({ model: 'sim', max_tokens: 8, betas: ['context-management-2025-06-27'], context_management: contextManagement as never, messages: [{ role: 'user', content: 'hi' }] })
        .catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(Anthropic.BadRequestError);
      expect((failure as InstanceType<typeof Anthropic.BadRequestError>).error).toEqual({ type: 'error', error: { type: 'invalid_request_error', message } });
    }
    expect(upstream.requestsTo('/v1/messages')).toHaveLength(0);
  });
});

describe('issue 38 item 2: /v1/messages/count_tokens with context_management', () => {
  it('reports what the edits leave as input_tokens and the history as sent as original_input_tokens; neither count is sent the field', async () => {
    const { upstream, client } = await started();
    // llama-server's count: its tokens of the body it gets (here a quarter of its bytes, the double's tokenizer).
    upstream.route('POST', '/v1/messages/count_tokens', (exchange: FakeExchange) => replies.json(200, { input_tokens: Math.round(exchange.request.body.length / 4) })(exchange));
    const counted = await client.beta.messages.countTokens({ ...clearingRequest(), betas: ['context-management-2025-06-27'] });
    const calls = upstream.requestsTo('/v1/messages/count_tokens');
    expect(calls).toHaveLength(2);
    for (const call of calls) expect(call.body.toString()).not.toContain('context_management');
    const [original, edited] = calls.map((call) => Math.round(call.body.length / 4));
    expect(counted).toEqual({ input_tokens: edited, context_management: { original_input_tokens: original } });
    expect(edited!).toBeLessThan(original! - 7 * 250);
    expect(resultsOf(calls[1]!.json as Sent).get('toolu_0')).toMatch(CLEARED);
    // Under its trigger nothing is cleared: both figures are the one count.
    const under = await client.beta.messages.countTokens({
      model: 'sim',
      betas: ['context-management-2025-06-27'],
      context_management: { edits: [{ type: 'clear_tool_uses_20250919' }] },
      messages: toolLoop(10) as never,
    });
    expect(under.context_management).toEqual({ original_input_tokens: under.input_tokens });
  });

  it("a malformed edit gets a 400 in Anthropic's shape, and nothing is counted", async () => {
    const { upstream, client } = await started();
    upstream.route('POST', '/v1/messages/count_tokens', replies.json(200, { input_tokens: 7 }));
    const failure = await client.beta.messages
      .countTokens({ model: 'sim', betas: ['context-management-2025-06-27'], context_management: { edits: [{ type: 'clear_tool_uses_20250919', keep: 3 }] } as never, messages: [{ role: 'user', content: 'hi' }] })
      .catch((error: unknown) => error);
    expect((failure as InstanceType<typeof Anthropic.BadRequestError>).error).toEqual({ type: 'error', error: { type: 'invalid_request_error', message: 'context_management.edits[0].keep: must be an object' } });
    expect(upstream.requestsTo('/v1/messages/count_tokens')).toHaveLength(0);
  });
});

describe('issue 38 item 3: the edits are seen where every tier is', () => {
  it('/metrics and the dashboard count the clearing as a compression, and observe mode says what it would clear and forwards the history as sent', async () => {
    const { upstream, client, url } = await started();
    const edits = { edits: [{ type: 'clear_tool_uses_20250919' as const, trigger: { type: 'input_tokens' as const, value: 2000 } }] };
    const observed = await client.beta.messages
      .create({ model: 'sim', max_tokens: 64, tools: TOOLS, betas: ['context-management-2025-06-27'], context_management: edits, messages: toolLoop(10) as never }, { headers: { 'x-compactor-mode': 'observe' } })
      .withResponse();
    expect(observed.response.headers.get('x-compactor')).toMatch(/^mode observe \(x-compactor-mode\); observe: would compress 7 tool results \(clear_tool_uses: 7 cleared; [\d.k]+ -> [\d.k]+ tokens\)$/);
    for (const [, text] of resultsOf(lastSent(upstream))) expect(text).toMatch(/^result \d+: x{1200}$/);
    expect(lastSent(upstream).context_management).toBeUndefined();

    const compacted = await client.beta.messages
      .create({ model: 'sim', max_tokens: 64, tools: TOOLS, betas: ['context-management-2025-06-27'], context_management: edits, messages: toolLoop(10) as never })
      .withResponse();
    expect(compacted.response.headers.get('x-compactor')).toMatch(/^compressed 7 tool results/);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toMatch(/^compactor_compactions_total\{model="sim",tier="compress",outcome="observed"\} 1$/m);
    expect(metrics).toMatch(/^compactor_compactions_total\{model="sim",tier="compress",outcome="compacted"\} 1$/m);
    // The dashboard: one conversation (the requests and the epoch the same), its epoch a compression.
    const state = (await (await fetch(`${url}/dashboard/state`)).json()) as { conversations: Array<{ requests: number; tiers: Record<string, number> }> };
    expect(state.conversations).toHaveLength(1);
    expect(state.conversations[0]).toMatchObject({ requests: 2, tiers: { compress: 1 } });
    // Observe mode changes nothing, so it reports nothing applied.
    expect(observed.data.context_management ?? null).toBeNull();
  });
});
