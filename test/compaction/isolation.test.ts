import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/transcript/message.js';
import { estimateRequestTokens } from '../../src/transcript/tokens.js';
import { compactorWith } from '../support/compaction.js';
import { conversation } from '../support/conversation.js';
import { JsonUpstreamDouble } from '../support/json-upstream-double.js';
import { chatRequestView } from '../../src/formats/chat/read.js';

/**
 * Issue 13, isolation: what one client sends never changes how another's
 * conversation is compacted, and an epoch never carries one history's text
 * into another's.
 */

type Engine = ReturnType<typeof compactorWith>['compactor'];

const body = (messages: ChatMessage[]) => ({ model: 'm', messages });

function prepare(compactor: Engine, messages: ChatMessage[], tenant: string, authorization?: string) {
  return compactor.compact({
    request: chatRequestView(body(messages)),
    tenant,
    signal: new AbortController().signal,
    ...(authorization === undefined ? {} : { upstreamHeaders: { authorization } }),
  });
}

/** A history of about `tokens` estimated tokens. */
function historyOf(tokens: number): ChatMessage[] {
  const messages = conversation({ turns: 2 });
  let turns = 2;
  while (estimateRequestTokens({ messages }) < tokens) messages.splice(0, messages.length, ...conversation({ turns: ++turns }));
  return messages;
}

describe('item 3: what one client sends never changes how another conversation is compacted', () => {
  it("(b) four requests of digits teach their tenant's ratio only: another's 40%-of-window history is forwarded untouched", async () => {
    // The upstream counts digits at one token each (4 per estimated token), the rest at 1 per estimated token.
    const upstream = JsonUpstreamDouble.llamaServer({
      countTokens: (request) => {
        const text = JSON.stringify(request['messages']);
        return text.includes('0123456789') ? text.length : Math.ceil(text.length / 4);
      },
    });
    const { compactor, summarizer } = compactorWith({}, { upstream });
    // ~4.6k estimated tokens of digits: near the threshold (6093 of the 8k window's 7168 budget), so it is counted exactly.
    const digits: ChatMessage[] = [{ role: 'user', content: '0123456789'.repeat(1840) }];
    for (let request = 0; request < 4; request++) await prepare(compactor, digits, 'mallory').catch(() => undefined);
    const alice = historyOf(0.4 * 8192);
    const prepared = await prepare(compactor, alice, 'alice');
    expect(prepared.changed).toBe(false);
    expect(prepared.messages).toBe(alice);
    expect(summarizer.calls).toBe(0);
  });

  it("(a) a wrong key's failed window lookup does not switch compaction off for the next client", async () => {
    const upstream = new JsonUpstreamDouble({
      'GET /props': (_body, headers) =>
        headers?.authorization === 'Bearer right'
          ? { status: 200, body: { default_generation_settings: { n_ctx: 8192 } } }
          : { status: 401, body: { error: { message: 'Invalid API Key' } } },
    });
    const { compactor, summarizer } = compactorWith({}, { upstream });
    const long = historyOf(8192);
    const mallory = await prepare(compactor, long, 'mallory', 'Bearer wrong');
    expect(mallory.changed).toBe(false);
    const alice = await prepare(compactor, long, 'alice', 'Bearer right');
    expect(alice.changed).toBe(true);
    expect(summarizer.calls).toBeGreaterThan(0);
  });
});

describe('item 1: a summary never carries text from beyond its cut', () => {
  const SECRET = 'SECRET-4111-1111';
  // A fixed few-shot preamble both users send: the system prompt and 18 worked turns (~5.8k tokens).
  const preamble = conversation({ turns: 19 }).slice(0, -1);
  const padding = (who: string) => ` ${who} adds context.`.repeat(80);
  const alice: ChatMessage[] = [...preamble, { role: 'user', content: `Alice: charge my card ${SECRET}.${padding('Alice')}` }];
  const bob: ChatMessage[] = [...preamble, { role: 'user', content: `Bob: what is the weather?${padding('Bob')}` }];

  function summarizerThatRepeats(summarizer: ReturnType<typeof compactorWith>['summarizer']): void {
    // A summarizer that keeps what it is given: whatever it saw of the secret is in its notes.
    summarizer.answer = (prompt) => ({ choices: [{ message: { role: 'assistant', content: `NOTES: the preamble.${prompt.includes(SECRET) ? ` A card: ${SECRET}.` : ''}` } }] });
  }

  it("two users of one key who share a few-shot preamble: Alice's later text never reaches Bob's forwarded prompt", async () => {
    const { compactor, summarizer } = compactorWith();
    summarizerThatRepeats(summarizer);
    const forAlice = await prepare(compactor, alice, 'shared-key');
    expect(forAlice.changed).toBe(true);
    expect(summarizer.calls).toBeGreaterThan(0);
    const forBob = await prepare(compactor, bob, 'shared-key');
    expect(forBob.changed).toBe(true);
    expect(JSON.stringify(forBob.messages)).not.toContain(SECRET);
  });

  it('a growing conversation keeps reusing its epoch; an edited message branches and gets its own', async () => {
    const { compactor, summarizer } = compactorWith();
    summarizerThatRepeats(summarizer);
    await prepare(compactor, alice, 'alice');
    const calls = summarizer.calls;
    const grown: ChatMessage[] = [...alice, { role: 'assistant', content: 'Done.' }, { role: 'user', content: 'Thanks.' }];
    const reused = await prepare(compactor, grown, 'alice');
    expect(reused.report).toMatch(/^epoch reused/);
    expect(summarizer.calls).toBe(calls);
    // Alice edits her message in the chat UI: the history branches before the text the summary saw.
    const edited: ChatMessage[] = [...preamble, { role: 'user', content: `Alice: never mind the card.${padding('Alice')}` }];
    const branched = await prepare(compactor, edited, 'alice');
    expect(summarizer.calls).toBeGreaterThan(calls);
    expect(JSON.stringify(branched.messages)).not.toContain(SECRET);
  });
});
