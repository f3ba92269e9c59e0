import OpenAI, { APIError } from 'openai';
import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/transcript/message.js';
import { contentText } from '../../src/transcript/message.js';
import { conversation, factsIn } from '../support/conversation.js';
import { replies } from '../support/fake-upstream.js';
import { closedAfterEachTest } from '../support/proxy.js';
import { throughCompactor } from '../support/openai-through-proxy.js';
import { RESPONSE, STREAM_EVENTS } from '../support/responses-answer.js';

/**
 * Issue 38 item 1: OpenAI's `POST /v1/responses/compact` served for a local
 * model, through the real `openai` package (`client.responses.compact`,
 * whose `CompactedResponse` is documented as "a list of all user messages,
 * followed by a single compaction item"; the `compaction` input item with its
 * `encrypted_content`: openai-node `ResponseCompactionItemParam`). The
 * summary goes to the simulated llama-server's chat completions; the
 * follow-up `/v1/responses` requests go to a double of llama-server's
 * `/v1/responses` (it answers the Responses shape: tools/server/README.md,
 * "POST /v1/responses"), which records what reaches it. Before issue 38 the
 * route did not exist: compactor passed it on and the server answered 404.
 */

const WINDOW = 8_192;
const opened = closedAfterEachTest();

const INSTRUCTIONS = 'You are a careful coding agent.';

type Item = Record<string, unknown>;

/** A chat history (after its system message) as the Responses input items Codex sends. */
function itemsOf(messages: readonly ChatMessage[]): Item[] {
  const items: Item[] = [];
  for (const message of messages) {
    if (message.role === 'system') continue;
    if (message.role === 'user') items.push({ type: 'message', role: 'user', content: [{ type: 'input_text', text: contentText(message.content) }] });
    else if (message.role === 'tool') items.push({ type: 'function_call_output', call_id: message.tool_call_id, output: contentText(message.content) });
    else {
      const text = contentText(message.content);
      if (text !== '') items.push({ type: 'message', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] });
      for (const call of message.tool_calls ?? []) items.push({ type: 'function_call', call_id: call.id, name: call.function.name, arguments: call.function.arguments });
    }
  }
  return items;
}

const started = (config: Record<string, unknown> = {}) => throughCompactor(opened, WINDOW, config);

/** A long history: 12 turns of two tool steps each, every turn planting a fact (`FACT-<turn>`). */
function history(): Item[] {
  return itemsOf(conversation({ turns: 12, stepsPerTurn: 2, resultBytes: 400 }));
}

const NEXT: Item = { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Now run the tests.' }] };

function inputOf(request: { json: unknown }): Item[] {
  return (request.json as { input: Item[] }).input;
}

function metric(text: string, outcome: string): number {
  const line = text.split('\n').find((entry) => entry.startsWith(`compactor_compaction_items_total{outcome="${outcome}"}`));
  return line === undefined ? 0 : Number(line.split(' ').at(-1));
}

async function compacted(client: OpenAI, input: Item[]) {
  return client.responses.compact({ model: 'sim', instructions: INSTRUCTIONS, input: input as unknown as OpenAI.Responses.ResponseInputItem[] });
}

describe('issue 38 item 1: POST /v1/responses/compact for a local model', () => {
  it('compacts: the user messages as they came and one compaction item, the summary covering every turn, nothing forwarded but the summary call', async () => {
    const { upstream, llama, client, proxy } = await started();
    const input = history();
    const answer = await client.responses.compact({ model: 'sim', instructions: INSTRUCTIONS, input: input as unknown as OpenAI.Responses.ResponseInputItem[] }).withResponse();
    const compaction = answer.data;
    expect(compaction.object).toBe('response.compaction');
    expect(compaction.id).toMatch(/^resp_/);
    const users = input.filter((item) => item['role'] === 'user');
    expect(compaction.output.slice(0, -1)).toEqual(users);
    const item = compaction.output.at(-1) as unknown as Item;
    expect(item).toMatchObject({ type: 'compaction' });
    expect(item['encrypted_content']).toMatch(/^compactor-v1\.[A-Za-z0-9_-]+$/);
    // Sealed, not plain: the notes' facts are not readable in the token.
    expect(String(item['encrypted_content'])).not.toMatch(/FACT-/);
    expect(compaction.usage.input_tokens).toBeGreaterThan(compaction.usage.output_tokens);
    expect(answer.response.headers.get('x-compactor')).toMatch(/^summarized \d+ messages -> 1 summary/);
    expect(llama.summaryRecords).toHaveLength(1);
    // The summary saw every turn, the last one's steps included (the simulated model lists every fact its prompt shows).
    expect(factsIn(llama.summaryRecords[0]!.prompt)).toEqual(new Set(Array.from({ length: 12 }, (_, turn) => `FACT-${turn + 1}`)));
    expect(llama.chatRecords).toHaveLength(0);
    expect(upstream.requestsTo('/v1/responses')).toHaveLength(0);
    expect(upstream.requestsTo('/v1/responses/compact')).toHaveLength(0);

    // The same history again: the same epoch, no second summary call (the same cache as every compaction).
    const again = await compacted(client, input);
    expect(again.output.slice(0, -1)).toEqual(users);
    expect(llama.summaryRecords).toHaveLength(1);
    const metrics = (await proxy.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metric(metrics, 'sealed')).toBe(2);
  });

  it('a follow-up carrying the item reaches the upstream with it opened into the summary pair, the same bytes every time (not streamed)', async () => {
    const { upstream, llama, client, proxy } = await started();
    upstream.route('POST', '/v1/responses', replies.json(200, RESPONSE));
    const compaction = await compacted(client, history());
    const input = [...compaction.output, NEXT] as unknown as OpenAI.Responses.ResponseInputItem[];

    const first = await client.responses.create({ model: 'sim', instructions: INSTRUCTIONS, input }).withResponse();
    expect(first.data.output_text).toBe('Done.');
    expect(first.response.headers.get('x-compactor')).toMatch(/^opened 1 compaction item/);
    const forwarded = inputOf(upstream.requestsTo('/v1/responses')[0]!);
    const users = compaction.output.slice(0, -1) as unknown as Item[];
    expect(forwarded.slice(0, users.length)).toEqual(users);
    const [notes, acknowledgement, next] = forwarded.slice(users.length);
    expect(notes).toMatchObject({ type: 'message', role: 'user' });
    const notesText = ((notes!['content'] as Item[])[0]!['text'] as string);
    expect(notesText.startsWith('[compacted:summary] ')).toBe(true);
    // The notes the summary call wrote, every fact of the history in them.
    expect(factsIn(notesText)).toEqual(new Set(Array.from({ length: 12 }, (_, turn) => `FACT-${turn + 1}`)));
    expect(acknowledgement).toMatchObject({ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: '[compacted:summary] Understood; continuing from these notes.' }] });
    expect(next).toEqual(NEXT);
    expect(JSON.stringify(forwarded)).not.toContain('encrypted_content');

    // Byte-stable: the same item, the same bytes upstream (the KV cache holds), and no further summary.
    await client.responses.create({ model: 'sim', instructions: INSTRUCTIONS, input });
    const [a, b] = upstream.requestsTo('/v1/responses');
    expect(b!.body.equals(a!.body)).toBe(true);
    expect(llama.summaryRecords).toHaveLength(1);
    const metrics = (await proxy.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metric(metrics, 'opened')).toBe(2);
  });

  it('a streamed follow-up carrying the item: opened the same way, its stream relayed', async () => {
    const { upstream, client } = await started();
    upstream.route('POST', '/v1/responses', replies.sse(STREAM_EVENTS));
    const compaction = await compacted(client, history());
    const input = [...compaction.output, NEXT] as unknown as OpenAI.Responses.ResponseInputItem[];
    const stream = await client.responses.create({ model: 'sim', instructions: INSTRUCTIONS, input, stream: true });
    const types: string[] = [];
    for await (const event of stream) types.push(event.type);
    expect(types).toEqual(['response.created', 'response.output_text.delta', 'response.output_text.delta', 'response.completed']);
    const forwarded = inputOf(upstream.requestsTo('/v1/responses')[0]!);
    expect(forwarded.some((item) => item['type'] === 'compaction')).toBe(false);
    expect(JSON.stringify(forwarded)).toContain('[compacted:summary] Understood; continuing from these notes.');
  });

  it('a tampered item gets a 400 in the Responses error shape and nothing is forwarded, streamed or not', async () => {
    const { upstream, client, proxy } = await started();
    upstream.route('POST', '/v1/responses', replies.json(200, RESPONSE));
    const compaction = await compacted(client, history());
    const item = compaction.output.at(-1) as unknown as Item;
    const token = String(item['encrypted_content']);
    // One character of the sealed text changed.
    const at = token.length - 10;
    const tampered = `${token.slice(0, at)}${token[at] === 'A' ? 'B' : 'A'}${token.slice(at + 1)}`;
    const input = [...compaction.output.slice(0, -1), { ...item, encrypted_content: tampered }, NEXT] as unknown as OpenAI.Responses.ResponseInputItem[];
    const index = compaction.output.length - 1;
    for (const stream of [false, true]) {
      const error = await client.responses.create({ model: 'sim', instructions: INSTRUCTIONS, input, stream }).then(
        () => null,
        (caught: unknown) => caught,
      );
      expect(error).toBeInstanceOf(APIError);
      expect((error as APIError).status).toBe(400);
      expect((error as APIError).code).toBe('invalid_body');
      expect((error as APIError).param).toBe(`input[${index}].encrypted_content`);
      expect((error as APIError).message).toMatch(/does not verify/);
    }
    expect(upstream.requestsTo('/v1/responses')).toHaveLength(0);
    const metrics = (await proxy.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metric(metrics, 'refused')).toBe(2);
  });

  it("a foreign item (OpenAI's own, another compactor's, another credential's) gets a 400 and nothing is forwarded", async () => {
    const { upstream, client, proxy } = await started();
    upstream.route('POST', '/v1/responses', replies.json(200, RESPONSE));
    const compaction = await compacted(client, history());
    const users = compaction.output.slice(0, -1);
    const item = compaction.output.at(-1) as unknown as Item;
    const send = (sender: OpenAI, encrypted: string) =>
      sender.responses
        .create({ model: 'sim', instructions: INSTRUCTIONS, input: [...users, { type: 'compaction', encrypted_content: encrypted }, NEXT] as unknown as OpenAI.Responses.ResponseInputItem[] })
        .then(
          () => null,
          (caught: unknown) => caught as APIError,
        );

    // OpenAI's: a Fernet-like token compactor never made.
    const openai = await send(client, 'gAAAAABpZ2VuZXJhdGVkLWJ5LW9wZW5haS1ub3QtY29tcGFjdG9y');
    expect(openai).toBeInstanceOf(APIError);
    expect(openai!.status).toBe(400);
    expect(openai!.message).toMatch(/was not made by this compactor/);

    // Another compactor's (its own random key): it does not verify here.
    const other = await started();
    const theirs = (await compacted(other.client, history())).output.at(-1) as unknown as Item;
    const foreign = await send(client, String(theirs['encrypted_content']));
    expect(foreign!.status).toBe(400);
    expect(foreign!.message).toMatch(/does not verify/);

    // This compactor's item, carried by another credential (another tenant): it does not open either.
    const stranger = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'sk-other', maxRetries: 0, timeout: 15_000 });
    const stolen = await send(stranger, String(item['encrypted_content']));
    expect(stolen!.status).toBe(400);
    expect(stolen!.message).toMatch(/does not verify/);
    expect(upstream.requestsTo('/v1/responses')).toHaveLength(0);
  });

  it('with one seal_key, an item sealed by one compactor opens in another (replicas, restarts)', async () => {
    const key = 'a-deployment-key-of-32-characters';
    const one = await started({ compaction: { enabled: true, seal_key: key } });
    const two = await started({ compaction: { enabled: true, seal_key: key } });
    two.upstream.route('POST', '/v1/responses', replies.json(200, RESPONSE));
    const compaction = await compacted(one.client, history());
    await two.client.responses.create({ model: 'sim', instructions: INSTRUCTIONS, input: [...compaction.output, NEXT] as unknown as OpenAI.Responses.ResponseInputItem[] });
    expect(JSON.stringify(inputOf(two.upstream.requestsTo('/v1/responses')[0]!))).toContain('[compacted:summary] ');
  });

  it('previous_response_id gets a 400 in the Responses error shape: compactor keeps no responses', async () => {
    const { upstream, client } = await started();
    const error = await client.responses.compact({ model: 'sim', previous_response_id: 'resp_123', input: [NEXT] as unknown as OpenAI.Responses.ResponseInputItem[] }).then(
      () => null,
      (caught: unknown) => caught as APIError,
    );
    expect(error).toBeInstanceOf(APIError);
    expect(error!.status).toBe(400);
    expect(error!.param).toBe('previous_response_id');
    expect(error!.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_body', param: 'previous_response_id' });
    expect(upstream.requests).toHaveLength(0);
  });

  it('a second compaction of a history carrying an item merges its notes, and /responses/compact answers without /v1', async () => {
    const { llama, proxy, client } = await started();
    const compaction = await compacted(client, history());
    const more = itemsOf(conversation({ turns: 20, stepsPerTurn: 2, resultBytes: 400 }).slice(-30));
    const bare = new OpenAI({ baseURL: proxy.url, apiKey: 'sk-test', maxRetries: 0, timeout: 15_000 });
    const second = await bare.responses.compact({ model: 'sim', instructions: INSTRUCTIONS, input: [...compaction.output, ...more] as unknown as OpenAI.Responses.ResponseInputItem[] });
    expect(second.object).toBe('response.compaction');
    expect(second.output.filter((item) => item.type === 'compaction')).toHaveLength(1);
    expect(llama.summaryRecords).toHaveLength(2);
    // The first notes were in the second summary's prompt (opened), so their facts carry on.
    expect(llama.summaryRecords[1]!.prompt).toContain('[compacted:summary] ');
    expect(factsIn(llama.summaryRecords[1]!.prompt).has('FACT-1')).toBe(true);
  });

  it('a /v1/responses request ending in a compaction_trigger (Codex remote compaction v2) is answered with one compaction item, streamed and not, and nothing is forwarded', async () => {
    const { upstream, llama, client } = await started();
    upstream.route('POST', '/v1/responses', replies.json(200, RESPONSE));
    // openai-node ResponseInputItem.CompactionTrigger: "Compacts the current context. Must be the final input item."
    const input = [...history(), { type: 'compaction_trigger' }] as unknown as OpenAI.Responses.ResponseInputItem[];
    const answer = await client.responses.create({ model: 'sim', instructions: INSTRUCTIONS, input }).withResponse();
    expect(answer.data.object).toBe('response');
    expect(answer.data.status).toBe('completed');
    expect(answer.data.output).toHaveLength(1);
    const item = answer.data.output[0] as unknown as Item;
    expect(item).toMatchObject({ type: 'compaction' });
    expect(item['encrypted_content']).toMatch(/^compactor-v1\./);
    expect(answer.response.headers.get('x-compactor')).toMatch(/^summarized \d+ messages -> 1 summary/);
    expect(llama.summaryRecords).toHaveLength(1);
    // The trigger is no message of the history: the summary never saw it.
    expect(JSON.stringify(llama.summaryRecords[0]!.messages)).not.toContain('compaction_trigger');

    const stream = await client.responses.create({ model: 'sim', instructions: INSTRUCTIONS, input, stream: true });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    expect(events.map((event) => event.type)).toEqual(['response.created', 'response.output_item.added', 'response.output_item.done', 'response.completed']);
    const done = events.find((event) => event.type === 'response.output_item.done') as OpenAI.Responses.ResponseOutputItemDoneEvent;
    expect(done.item).toMatchObject({ type: 'compaction' });
    // The same history: the same epoch, no second summary.
    expect(llama.summaryRecords).toHaveLength(1);
    expect(upstream.requestsTo('/v1/responses')).toHaveLength(0);

    // The item goes on like the endpoint's.
    await client.responses.create({ model: 'sim', instructions: INSTRUCTIONS, input: [...(history().filter((entry) => entry['role'] === 'user')), done.item, NEXT] as unknown as OpenAI.Responses.ResponseInputItem[] });
    expect(JSON.stringify(inputOf(upstream.requestsTo('/v1/responses')[0]!))).toContain('[compacted:summary] Understood; continuing from these notes.');
  });

  it('item 3: in observe mode it still compacts (the client asked) and items are opened (no server knows them); the log line, /metrics and the dashboard count it', async () => {
    const { upstream, llama, client, proxy } = await started({ compaction: { enabled: true, mode: 'observe' } });
    upstream.route('POST', '/v1/responses', replies.json(200, RESPONSE));
    const compaction = await compacted(client, history());
    expect(compaction.output.at(-1)).toMatchObject({ type: 'compaction' });
    expect(llama.summaryRecords).toHaveLength(1);
    const answer = await client.responses.create({ model: 'sim', instructions: INSTRUCTIONS, input: [...compaction.output, NEXT] as unknown as OpenAI.Responses.ResponseInputItem[] }).withResponse();
    expect(answer.response.headers.get('x-compactor')).toMatch(/^opened 1 compaction item/);
    expect(JSON.stringify(inputOf(upstream.requestsTo('/v1/responses')[0]!))).toContain('[compacted:summary] Understood; continuing from these notes.');

    // The log line: the compaction on its route, the opened item on the chat route (counts and sizes only, no text).
    const compactLine = await proxy.logs.request((line) => line['route'] === 'compact');
    expect(compactLine).toMatchObject({ path: '/v1/responses/compact', status: 200 });
    expect(String(compactLine['compaction'])).toMatch(/^summarized \d+ messages -> 1 summary/);
    const chatLine = await proxy.logs.request((line) => line['route'] === 'chat');
    expect(String(chatLine['compaction'])).toMatch(/^opened 1 compaction item/);
    expect(proxy.logs.text).not.toMatch(/FACT-\d+/);

    const metrics = (await proxy.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metric(metrics, 'sealed')).toBe(1);
    expect(metric(metrics, 'opened')).toBe(1);
    expect(metrics).toMatch(/compactor_compactions_total\{[^}]*tier="summary"[^}]*outcome="compacted"[^}]*\} 1/);
    const state = (await (await fetch(`${proxy.url}/dashboard/state`)).json()) as { compactions: { tier: string; report: string }[] };
    expect(state.compactions.map((event) => event.tier)).toEqual(['summary']);
    expect(state.compactions[0]!.report).toMatch(/^summarized \d+ messages/);
  });

  it('a body that only names "compaction" (no item) goes as it came, and with x-compactor-mode: off an item is still opened (no server knows it)', async () => {
    const { upstream, client } = await started();
    upstream.route('POST', '/v1/responses', replies.json(200, RESPONSE));
    const plain = { model: 'sim', instructions: INSTRUCTIONS, input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'compaction' }] }], metadata: { topic: 'compaction' } };
    const bytes = Buffer.from(JSON.stringify(plain));
    await client.responses.create(plain as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming);
    expect(upstream.requestsTo('/v1/responses')[0]!.body.equals(bytes)).toBe(true);

    const compaction = await compacted(client, history());
    const answer = await client.responses
      .create({ model: 'sim', instructions: INSTRUCTIONS, input: [...compaction.output, NEXT] as unknown as OpenAI.Responses.ResponseInputItem[] }, { headers: { 'x-compactor-mode': 'off' } })
      .withResponse();
    expect(answer.response.headers.get('x-compactor')).toMatch(/^opened 1 compaction item/);
    expect(JSON.stringify(inputOf(upstream.requestsTo('/v1/responses')[1]!))).toContain('[compacted:summary] ');
  });
});
