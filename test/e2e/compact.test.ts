import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import OpenAI, { APIError } from 'openai';
import { describe, expect, it } from 'vitest';
import { contentText, type ChatMessage } from '../../src/transcript/message.js';
import { conversation } from '../support/conversation.js';
import { closedAfterEachTest } from '../support/proxy.js';
import { throughCompactor } from '../support/openai-through-proxy.js';

/**
 * Issue 17, explicit compaction: `POST /v1/compact` answers the compacted
 * history as JSON without forwarding a chat request, with the chat route's
 * epochs, single flight and errors. Through the real openai client
 * (`client.post('/compact', …)`) and curl, against the simulated llama-server.
 */

const run = promisify(execFile);
const WINDOW = 8_192;
const opened = closedAfterEachTest();

interface CompactionAnswer {
  object: string;
  messages: ChatMessage[];
  report: string;
  tokens: { before: number; after: number };
  epoch: 'new' | 'reused' | 'none';
}

const started = (config: Record<string, unknown> = {}) => throughCompactor(opened, WINDOW, config);

const compact = (client: OpenAI, body: Record<string, unknown>): Promise<CompactionAnswer> => client.post('/compact', { body });

describe('issue 17 item 2: POST /v1/compact', () => {
  it('POST /v1/compact compacts a long history without forwarding it, then reuses the epoch, and the chat route reuses it too (openai client)', async () => {
    const { llama, client } = await started();
    const messages = conversation({ turns: 20, stepsPerTurn: 2, resultBytes: 400 });

    const first = await compact(client, { model: 'sim', messages });
    expect(first).toMatchObject({ object: 'compaction', epoch: 'new' });
    expect(first.report).toMatch(/^summarized \d+ messages -> 1 summary \+ \d+ kept/);
    expect(contentText(first.messages[1]!.content)).toMatch(/^\[compacted:summary\] /);
    expect(first.messages.at(-1)).toEqual(messages.at(-1));
    expect(first.tokens.after).toBeLessThan(first.tokens.before);
    expect(llama.summaryRecords).toHaveLength(1);
    expect(llama.chatRecords).toHaveLength(0);

    const again = await compact(client, { model: 'sim', messages });
    expect(again.epoch).toBe('reused');
    expect(again.messages).toEqual(first.messages);
    expect(llama.summaryRecords).toHaveLength(1);

    // Same epochs: a chat request with that history is forwarded compacted, with no second summary.
    await client.chat.completions.create({ model: 'sim', messages: messages as OpenAI.Chat.ChatCompletionMessageParam[], max_tokens: 16 });
    expect(llama.chatRecords[0]!.messages).toEqual(first.messages);
    expect(llama.summaryRecords).toHaveLength(1);
  });

  it('POST /v1/compact leaves a history under the threshold alone unless force is true (openai client)', async () => {
    const { llama, client } = await started();
    const messages = conversation({ turns: 10, stepsPerTurn: 2, resultBytes: 400 });

    const unforced = await compact(client, { model: 'sim', messages });
    expect(unforced).toMatchObject({ epoch: 'none', report: 'nothing to compact', messages });
    expect(unforced.tokens.after).toBe(unforced.tokens.before);
    expect(llama.records).toHaveLength(0);

    const forced = await compact(client, { model: 'sim', messages, force: true });
    expect(forced.epoch).toBe('new');
    expect(contentText(forced.messages[1]!.content)).toMatch(/^\[compacted:summary\] /);
    expect(forced.messages.length).toBeLessThan(messages.length);
    expect(llama.summaryRecords).toHaveLength(1);
    // `force` is compactor's word: it never reaches the model.
    expect(JSON.stringify(llama.summaryRecords[0]!.messages)).not.toContain('"force"');
    expect(llama.chatRecords).toHaveLength(0);
  });

  it("POST /v1/compact answers bad input with a 400 in OpenAI's shape (openai client and curl)", async () => {
    const { proxy, client, llama } = await started();
    const error = await compact(client, { model: 'sim', messages: [] }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).status).toBe(400);
    expect((error as APIError).code).toBe('invalid_body');

    const body = JSON.stringify({ model: 'sim', messages: [{ role: 'user', content: 'hi' }], force: 'yes' });
    const { stdout } = await run('curl', ['-sS', '-w', '\n%{http_code}', '-H', 'content-type: application/json', '--data-binary', body, `${proxy.url}/v1/compact`], { timeout: 15_000 });
    const [json, status] = stdout.split('\n');
    expect(status).toBe('400');
    expect(JSON.parse(json!)).toEqual({ error: { message: 'force: expected true or false', type: 'invalid_request_error', param: 'force', code: 'invalid_body' } });
    expect(llama.records).toHaveLength(0);
  });

  it('POST /v1/compact with curl: the compacted history and its report header', async () => {
    const { proxy } = await started();
    const body = JSON.stringify({ model: 'sim', messages: conversation({ turns: 20, stepsPerTurn: 2, resultBytes: 400 }) });
    const { stdout } = await run('curl', ['-sS', '-i', '-H', 'content-type: application/json', '--data-binary', body, `${proxy.url}/v1/compact`], { timeout: 15_000 });
    expect(stdout).toMatch(/^HTTP\/1\.1 200/);
    expect(stdout).toMatch(/\r\nx-compactor: summarized \d+ messages/i);
    const answer = JSON.parse(stdout.slice(stdout.indexOf('\r\n\r\n') + 4)) as CompactionAnswer;
    expect(answer).toMatchObject({ object: 'compaction', epoch: 'new' });
  });
});
