import { describe, it, expect } from 'vitest';
import type { ChatMessage } from '../../../src/transcript/message.js';
import { estimateMessageTokens, estimateToolsTokens } from '../../../src/transcript/tokens.js';
import { mark } from '../../../src/transcript/marks.js';
import { renderTranscript } from '../../../src/transcript/render.js';
import { summarize, SummaryError } from '../../../src/compaction/summary/summarize.js';
import type { ChatCall, SummarySlot } from '../../../src/compaction/ports.js';
import type { SummarizeRequest, SummaryProgress } from '../../../src/compaction/types.js';
import { DEFAULT_SUMMARY_SYSTEM_PROMPT, openingWords, suffixInstruction } from '../../../src/compaction/summary/prompt.js';
import { conversation } from '../../support/conversation.js';

const answer = (content: unknown, extra: Record<string, unknown> = {}) => ({
  choices: [{ index: 0, message: { role: 'assistant', content, ...extra }, finish_reason: 'stop' }],
});

/** A fake upstream: answers each call with the next scripted reply (a function of the body, an error to throw, or a value). */
class FakeChat {
  readonly bodies: Array<Record<string, unknown>> = [];
  readonly signals: AbortSignal[] = [];
  constructor(readonly replies: Array<unknown | Error | ((body: Record<string, unknown>) => unknown)>) {}

  readonly call: ChatCall = async (body, signal) => {
    this.bodies.push(body);
    this.signals.push(signal);
    const reply = this.replies[this.bodies.length - 1] ?? new Error('no more scripted replies');
    if (reply instanceof Error) throw reply;
    return typeof reply === 'function' ? (reply as (body: Record<string, unknown>) => unknown)(body) : reply;
  };

  /** The user text of the n-th call (a prepend-mode request, or the instruction of a suffix-mode one). */
  userText(index: number): string {
    const messages = this.bodies[index]!['messages'] as ChatMessage[];
    return String(messages.at(-1)!.content);
  }
}

const tools = [{ type: 'function', function: { name: 'bash', parameters: { type: 'object' } } }];
const sizeOfMessages = (messages: readonly ChatMessage[], withTools: boolean): number =>
  messages.reduce((total, message) => total + estimateMessageTokens(message), 0) + (withTools ? estimateToolsTokens(tools) : 0);

/** A system message and three full turns, then the fourth turn's user message; the old part is turns 1 and 2. */
function request(overrides: Partial<SummarizeRequest> = {}, resultBytes = 400): SummarizeRequest {
  const candidate = conversation({ turns: 4, resultBytes });
  return {
    body: { model: 'client-model', messages: candidate, tools, temperature: 0.2, response_format: { type: 'json_object' }, n: 2, stream: true, chat_template_kwargs: { enable_thinking: false } },
    candidate,
    head: 1,
    cut: 13,
    marked: new Set<number>(),
    earlierNotes: null,
    window: null,
    sizeOfMessages,
    model: 'summary-model',
    maxTokens: 100,
    signal: new AbortController().signal,
    ...overrides,
  };
}

function progressOf(overrides: Partial<SummarizeRequest> = {}, resultBytes?: number): { request: SummarizeRequest; progress: SummaryProgress[] } {
  const progress: SummaryProgress[] = [];
  return { request: request({ onProgress: (step) => progress.push(step), ...overrides }, resultBytes), progress };
}

describe('summarize', () => {
  it('suffix mode when the whole candidate fits: the candidate as forwarded, plus one instruction quoting the first kept message', async () => {
    const chat = new FakeChat([answer('NOTES')]);
    const { request: asked, progress } = progressOf();
    const result = await summarize(asked, chat.call);
    expect(result).toEqual({ notes: 'NOTES', mode: 'suffix', calls: 1 });
    const body = chat.bodies[0]!;
    const messages = body['messages'] as ChatMessage[];
    expect(messages.slice(0, -1)).toEqual(asked.candidate);
    expect(messages).toHaveLength(asked.candidate.length + 1);
    expect(messages.at(-1)!.role).toBe('user');
    expect(chat.userText(0)).toContain('before the message that begins «Turn 3: continue the task; remember FACT-3.»');
    expect(chat.userText(0)).not.toContain('[compacted:summary]');
    expect(body['model']).toBe('summary-model');
    expect(body['tools']).toEqual(tools);
    expect(body['tool_choice']).toBe('none');
    expect(body['max_tokens']).toBe(100);
    expect(body['stream']).toBe(false);
    expect(body['temperature']).toBe(0.2);
    expect(body['chat_template_kwargs']).toEqual({ enable_thinking: false });
    expect(body).not.toHaveProperty('response_format');
    expect(body).not.toHaveProperty('n');
    expect(progress).toEqual([{ messages: 12, chunk: 1, chunks: 1 }]);
    expect(chat.signals[0]).toBe(asked.signal);
  });

  it('asks no tool_choice when the request has no tools', async () => {
    const chat = new FakeChat([answer('NOTES')]);
    const asked = request();
    await summarize({ ...asked, body: { model: 'm', messages: asked.candidate } }, chat.call);
    expect(chat.bodies[0]).not.toHaveProperty('tool_choice');
    expect(chat.bodies[0]).not.toHaveProperty('tools');
  });

  it('suffix mode asks to update earlier notes when the old part starts with a summary pair', async () => {
    const chat = new FakeChat([answer('MERGED')]);
    const base = request();
    const candidate = [
      base.candidate[0]!,
      { role: 'user', content: mark('summary', 'EARLIER NOTES') },
      { role: 'assistant', content: mark('summary', 'Understood; continuing from these notes.') },
      ...base.candidate.slice(1),
    ];
    await summarize({ ...base, candidate, cut: 15, marked: new Set([1, 2]), earlierNotes: 'EARLIER NOTES' }, chat.call);
    expect(chat.userText(0)).toContain('update them');
    expect(chat.userText(0)).toContain('the conversation wins');
  });

  it('suffix-cut mode when only the candidate cut at the cut fits', async () => {
    const base = request();
    const instruction = (keptOpening: string | null): ChatMessage => ({ role: 'user', content: suffixInstruction({ keptOpening, hasEarlierNotes: false }) });
    const whole = sizeOfMessages([...base.candidate, instruction(openingWords(String(base.candidate[base.cut]!.content)))], true);
    const cutOnly = sizeOfMessages([...base.candidate.slice(0, base.cut), instruction(null)], true);
    expect(cutOnly).toBeLessThan(whole);
    const chat = new FakeChat([answer('NOTES')]);
    // The cut candidate and the notes fill the window exactly.
    const { request: asked, progress } = progressOf({ window: cutOnly + 100 });
    const result = await summarize(asked, chat.call);
    expect(result).toEqual({ notes: 'NOTES', mode: 'suffix-cut', calls: 1 });
    const messages = chat.bodies[0]!['messages'] as ChatMessage[];
    expect(messages.slice(0, -1)).toEqual(asked.candidate.slice(0, asked.cut));
    expect(chat.userText(0)).toContain('handoff notes of everything above.');
    expect(chat.userText(0)).not.toContain('«');
    expect(progress).toEqual([{ messages: 12, chunk: 1, chunks: 1 }]);
  });

  it('prepend mode when the suffix call throws: the old part as text under the summary system prompt, no tools', async () => {
    const chat = new FakeChat([new Error('upstream answered 500'), answer('PREPENDED')]);
    const { request: asked, progress } = progressOf();
    const result = await summarize(asked, chat.call);
    expect(result).toEqual({ notes: 'PREPENDED', mode: 'prepend', calls: 2 });
    const body = chat.bodies[1]!;
    const messages = body['messages'] as ChatMessage[];
    expect(messages).toHaveLength(2);
    expect(messages[0]).toEqual({ role: 'system', content: DEFAULT_SUMMARY_SYSTEM_PROMPT });
    expect(messages[1]!.role).toBe('user');
    expect(chat.userText(1)).toContain(renderTranscript(asked.candidate.slice(asked.head, asked.cut)));
    expect(chat.userText(1)).not.toContain('Turn 3:');
    expect(chat.userText(1)).not.toContain('## Earlier notes');
    expect(body).not.toHaveProperty('tools');
    expect(body).not.toHaveProperty('tool_choice');
    expect(body).not.toHaveProperty('temperature');
    expect(body['chat_template_kwargs']).toEqual({ enable_thinking: false });
    expect(body['model']).toBe('summary-model');
    expect(body['max_tokens']).toBe(100);
    expect(body['stream']).toBe(false);
    expect(progress.at(-1)).toEqual({ messages: 12, chunk: 1, chunks: 1 });
  });

  it('prepend mode when the suffix answer is empty or a tool call', async () => {
    for (const bad of [answer(''), answer(null, { tool_calls: [{ id: 'x', type: 'function', function: { name: 'bash' } }] }), answer('<think>hmm</think>')]) {
      const chat = new FakeChat([bad, answer('PREPENDED')]);
      await expect(summarize(request(), chat.call)).resolves.toEqual({ notes: 'PREPENDED', mode: 'prepend', calls: 2 });
    }
  });

  it('uses a custom system prompt in prepend mode', async () => {
    const chat = new FakeChat([new Error('500'), answer('PREPENDED')]);
    await summarize(request({ systemPrompt: 'Write terse notes.' }), chat.call);
    expect((chat.bodies[1]!['messages'] as ChatMessage[])[0]).toEqual({ role: 'system', content: 'Write terse notes.' });
  });

  it('prepend mode passes earlier notes in their own section, never the marked pair as conversation', async () => {
    const base = request();
    const candidate = [
      base.candidate[0]!,
      { role: 'user', content: mark('summary', 'EARLIER NOTES') },
      { role: 'assistant', content: mark('summary', 'Understood; continuing from these notes.') },
      ...base.candidate.slice(1),
    ];
    for (const earlierNotes of ['EARLIER NOTES', null]) {
      const chat = new FakeChat([new Error('500'), answer('MERGED')]);
      await summarize({ ...base, candidate, cut: 15, marked: new Set([1, 2]), earlierNotes }, chat.call);
      const text = chat.userText(1);
      expect(text.startsWith('## Earlier notes\n\nEARLIER NOTES\n\n## Conversation')).toBe(true);
      expect(text).not.toContain('[compacted:summary]');
      expect(text).toContain('Update the earlier notes');
    }
  });

  it('folds several chunks when the old part is larger than the window: each request carries the previous notes', async () => {
    // Results of ~4 kB (1k tokens) each: the old part is ~4k tokens, the window 2.5k.
    const window = 2500;
    const chat = new FakeChat(Array.from({ length: 20 }, (_, index) => (index === 0 ? new Error('context exceeded') : answer(`NOTES ${index}`))));
    const { request: asked, progress } = progressOf({ window }, 4000);
    // Suffix mode cannot fit, whole or cut: the first call is already prepend mode. (Here it would have been tried; make sure.)
    expect(sizeOfMessages(asked.candidate.slice(0, asked.cut), true) + 100).toBeGreaterThan(window);
    chat.replies.shift();
    const result = await summarize(asked, chat.call);
    const chunks = chat.bodies.length;
    expect(chunks).toBeGreaterThan(1);
    expect(result).toEqual({ notes: `NOTES ${chunks}`, mode: 'prepend', calls: chunks });
    // s1 = S(c1), sk = S(s(k−1) + ck)
    expect(chat.userText(0)).not.toContain('## Earlier notes');
    for (let index = 1; index < chunks; index++) {
      expect(chat.userText(index).startsWith(`## Earlier notes\n\nNOTES ${index}\n\n## Conversation (part ${index + 1} of ${chunks})`)).toBe(true);
    }
    expect(chat.userText(0)).toContain(`## Conversation (part 1 of ${chunks})`);
    expect(progress).toEqual(Array.from({ length: chunks }, (_, index) => ({ messages: 12, chunk: index + 1, chunks })));
    // Every request fits the window with room for the notes.
    for (const body of chat.bodies) expect(sizeOfMessages(body['messages'] as ChatMessage[], false) + 100).toBeLessThanOrEqual(window);
    // Together the chunks carry the whole old part.
    const old = renderTranscript(asked.candidate.slice(asked.head, asked.cut)).replace(/\n/g, '');
    const carried = chat.bodies
      .map((_, index) => chat.userText(index).replace(/^[\s\S]*?## Conversation[^\n]*\n\n/, '').replace(/\n\n## Task[\s\S]*$/, ''))
      .join('')
      .replace(/\n/g, '');
    expect(carried).toBe(old);
  });

  it('throws a SummaryError naming both failures when everything fails', async () => {
    const chat = new FakeChat([new Error('suffix exploded'), new Error('prepend exploded')]);
    const failure = await summarize(request(), chat.call).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(SummaryError);
    const error = failure as SummaryError;
    expect(error.calls).toBe(2);
    expect(error.message).toContain('prepend exploded');
    expect(error.message).toContain('suffix mode: suffix exploded');
    expect(error.name).toBe('SummaryError');
  });

  it('throws a SummaryError, without a call, when neither suffix mode nor a prepend-mode chunk fits the window', async () => {
    const chat = new FakeChat([]);
    const failure = await summarize(request({ window: 1000 }, 4000), chat.call).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(SummaryError);
    expect((failure as SummaryError).message).toContain('leaves no room');
    expect(chat.bodies).toHaveLength(0);
  });

  it('stops at once when cancelled during suffix mode, without trying prepend mode', async () => {
    const controller = new AbortController();
    const chat = new FakeChat([
      () => {
        controller.abort(new Error('client left'));
        throw new Error('aborted');
      },
      answer('never'),
    ]);
    const failure = await summarize(request({ signal: controller.signal }), chat.call).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(SummaryError);
    expect((failure as SummaryError).message).toContain('cancelled');
    expect(chat.bodies).toHaveLength(1);
  });
});

describe('summarize: the slot each call goes to (issue 28)', () => {
  it("sends a suffix call to its conversation's slot and a prepend call to no conversation's", async () => {
    const slots: unknown[] = [];
    const replies = [new Error('suffix failed'), answer('NOTES')];
    const call: ChatCall = async (_body, _signal, _headers, slot) => {
      slots.push(slot);
      const reply = replies[slots.length - 1];
      if (reply instanceof Error) throw reply;
      return reply;
    };
    const result = await summarize(request({ slotKey: 'conversation-a' }), call);
    expect(result.mode).toBe('prepend');
    expect(slots).toEqual([{ kind: 'summary', key: 'conversation-a', grown: expect.any(Function) }, { kind: 'guest' }]);
  });

  it("gives the suffix call's slot the body grown to a longer history that starts with the candidate: the same old part asked for, over what the slot holds by then", async () => {
    const slots: Array<SummarySlot | undefined> = [];
    const bodies: Array<Record<string, unknown>> = [];
    const call: ChatCall = async (body, _signal, _headers, slot) => (slots.push(slot), bodies.push(body), answer('NOTES'));
    const asked = request({ slotKey: 'conversation-a', window: 100_000 });
    await summarize(asked, call);
    const slot = slots[0]!;
    const grown = slot.kind === 'summary' ? slot.grown : undefined;
    expect(grown).toBeDefined();
    // Parsed anew from a later request's bytes: equal messages, not the same objects.
    const later: ChatMessage[] = [...structuredClone(asked.candidate), { role: 'assistant', content: 'Turn 4 done.' }, { role: 'user', content: 'Turn 5: go on.' }];
    const body = grown!(later)!;
    const messages = body['messages'] as ChatMessage[];
    expect(messages.slice(0, -1)).toEqual(later);
    expect(messages.at(-1)).toEqual((bodies[0]!['messages'] as ChatMessage[]).at(-1));
    expect({ ...body, messages: undefined }).toEqual({ ...bodies[0], messages: undefined });
    // Nothing newer, another start, or more than the window holds: the body stays as it was written.
    expect(grown!(asked.candidate)).toBeUndefined();
    expect(grown!(later.map((message, index) => (index === 2 ? { ...message, content: 'edited' } : message)))).toBeUndefined();
    const tight = request({ slotKey: 'conversation-a', window: sizeOfMessages(messages.slice(0, asked.candidate.length).concat(messages.slice(-1)), true) + asked.maxTokens });
    slots.length = 0;
    await summarize(tight, call);
    const tightSlot = slots[0]!;
    expect(tightSlot.kind === 'summary' ? tightSlot.grown!(later) : 'no slot').toBeUndefined();
  });

  it('grows no body asked with the deployment\'s own instructions: they may speak of everything above', async () => {
    const slots: Array<SummarySlot | undefined> = [];
    const call: ChatCall = async (_body, _signal, _headers, slot) => (slots.push(slot), answer('NOTES'));
    await summarize(request({ slotKey: 'conversation-a', instructions: 'Summarize the conversation above.' }), call);
    expect(slots[0]).toEqual({ kind: 'summary', key: 'conversation-a' });
  });

  it('names no slot without a conversation key', async () => {
    const slots: unknown[] = [];
    const call: ChatCall = async (_body, _signal, _headers, slot) => (slots.push(slot), answer('NOTES'));
    await summarize(request(), call);
    expect(slots).toEqual([undefined]);
  });
});
