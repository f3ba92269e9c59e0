import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import type { ChatMessage } from '../../src/transcript/message.js';
import { conversation } from '../support/conversation.js';
import { FakeUpstream } from '../support/fake-upstream.js';
import { closedAfterEachTest, startProxy } from '../support/proxy.js';
import { SimulatedLlama } from '../support/simulated-llama.js';

/**
 * Issue 17, observe mode: `compaction.mode: observe` forwards every request
 * exactly as the client sent it (pair repair off too), makes no summary call,
 * and says what it would have done in the header, the log and /metrics.
 * Through the real openai client and curl, against the simulated llama-server.
 */

const run = promisify(execFile);
const CHAT = '/v1/chat/completions';
const WINDOW = 8_192;
const opened = closedAfterEachTest();

/** A history well past the threshold of an 8k window (about 24 KB), with a tool call whose result is missing. */
function longHistoryWithBrokenPair(): ChatMessage[] {
  const messages = conversation({ turns: 20, stepsPerTurn: 2, resultBytes: 400 });
  const last = messages.pop()!;
  messages.push({ role: 'assistant', content: '', tool_calls: [{ id: 'call_dangling', type: 'function', function: { name: 'bash', arguments: '{}' } }] });
  messages.push({ role: 'user', content: 'Never mind that call.' }, { role: 'assistant', content: 'OK.' }, last);
  return messages;
}

async function observing(config: Record<string, unknown> = {}) {
  const upstream = opened(await FakeUpstream.start());
  const llama = new SimulatedLlama(upstream, { window: WINDOW });
  const proxy = opened(await startProxy(upstream, { listen: true, config: { compaction: { enabled: true, mode: 'observe' }, ...config } }));
  return { upstream, llama, proxy };
}

describe('issue 17 item 1: observe mode', () => {
  it('observe mode forwards the bytes the client sent, makes no summary call, and says what it would do (openai client)', async () => {
    const { upstream, llama, proxy } = await observing();
    const client = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'sk-test', maxRetries: 0, timeout: 15_000 });
    const messages = longHistoryWithBrokenPair();
    const { data, response } = await client.chat.completions
      .create({ model: 'sim', messages: messages as OpenAI.Chat.ChatCompletionMessageParam[], max_tokens: 64 })
      .withResponse();
    expect(data.choices[0]?.message).toBeDefined();

    const header = response.headers.get('x-compactor') ?? '';
    // Then what the server spent on the answer (issue 36).
    expect(header).toMatch(/^observe: would repair 1 tool pair; would summarize \d+ messages -> 1 summary \+ \d+ kept \([\d.]+k -> [\d.]+k? tokens\); server \d+\.\d\d s prefill, \d+\.\d\d s decode$/);
    // Exactly what the client sent: the same bytes, the dangling call unanswered, nothing summarized.
    const forwarded = upstream.requestsTo(CHAT);
    expect(forwarded).toHaveLength(1);
    expect(JSON.parse(forwarded[0]!.body.toString('utf8')).messages).toEqual(messages);
    expect(llama.summaryRecords).toHaveLength(0);

    const line = await proxy.logs.request();
    // The log line has the same words; the server's seconds are its prefillMs / decodeMs.
    expect(line['compaction']).toBe(header.replace(/; server [^;]*$/, ''));
    expect(line['prefillMs']).toEqual(expect.any(Number));
    expect(line['repairs']).toBe(0);
    const metrics = await (await fetch(`${proxy.url}/metrics`)).text();
    expect(metrics).toMatch(/compactor_compactions_total\{model="sim",tier="summary",outcome="observed"\} 1/);
    expect(metrics).not.toMatch(/compactor_pair_repairs_total\{[^}]*\} [1-9]/);
    expect(metrics).not.toMatch(/compactor_summary_calls_total\{[^}]*\} [1-9]/);
    // No epoch written: the next request is observed again, not rewritten.
    expect(proxy.app.proxy.engine?.epochCount).toBe(0);
  });

  it('observe mode with pairs: reject forwards the broken history and says it would refuse it (curl)', async () => {
    const { upstream, proxy } = await observing({ pairs: 'reject' });
    const body = JSON.stringify({ model: 'sim', messages: [{ role: 'user', content: 'hi' }, { role: 'tool', tool_call_id: 'c9', content: 'orphan' }] });
    const { stdout } = await run('curl', ['-sS', '-D', '-', '-o', '/dev/null', '-H', 'content-type: application/json', '--data-binary', body, `${proxy.url}${CHAT}`], { timeout: 15_000 });
    expect(stdout).toMatch(/^HTTP\/1\.1 200/);
    expect(stdout).toMatch(/\r\nx-compactor: observe: would reject: messages\[1\]: tool result "c9" answers no call; server \d+\.\d\d s prefill, \d+\.\d\d s decode\r\n/i);
    expect(upstream.requestsTo(CHAT)[0]?.body.toString('utf8')).toBe(body);
  });

  it('observe mode on a short history says nothing of compaction and forwards it untouched (curl)', async () => {
    const { upstream, proxy } = await observing();
    const body = JSON.stringify({ model: 'sim', messages: [{ role: 'user', content: 'hi' }] });
    const { stdout } = await run('curl', ['-sS', '-D', '-', '-o', '/dev/null', '-H', 'content-type: application/json', '--data-binary', body, `${proxy.url}${CHAT}`], { timeout: 15_000 });
    expect(stdout).toMatch(/^HTTP\/1\.1 200/);
    // Nothing to say of compaction: the header carries only what the server spent (issue 36).
    expect(stdout).toMatch(/\r\nx-compactor: server \d+\.\d\d s prefill, \d+\.\d\d s decode\r\n/i);
    expect(stdout.toLowerCase()).not.toContain('observe');
    expect(upstream.requestsTo(CHAT)[0]?.body.toString('utf8')).toBe(body);
  });
});

describe('issue 17 item 1: observe mode is chosen by config, env or flag', () => {
  it('observe mode: compaction.mode, COMPACTOR_MODE and --observe', () => {
    const modeOf = (argv: string[], env: Record<string, string>) => {
      const result = loadConfig({ argv, env });
      if (!result.ok) throw new Error(result.errors.join('; '));
      return result.config.compaction.mode;
    };
    expect(modeOf([], {})).toBe('compact');
    expect(modeOf([], { COMPACTOR_MODE: 'observe' })).toBe('observe');
    expect(modeOf(['--observe'], {})).toBe('observe');
    expect(loadConfig({ argv: [], env: { COMPACTOR_MODE: 'watch' } })).toMatchObject({ ok: false, errors: ['compaction.mode: expected one of compact, observe (from COMPACTOR_MODE)'] });
  });
});
