import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it, vi } from 'vitest';
import type { ChatMessage } from '../../src/transcript/message.js';
import { chatRequestView } from '../../src/formats/registry.js';
import { conversation } from '../support/conversation.js';
import { compactorWith, SummarizerDouble } from '../support/compaction.js';

/**
 * Issue 21 item 3: a queued background summary keeps what its call needs
 * (the candidate, its hashes, the body's other fields, the headers), not the
 * whole request: the client's own messages, where an oversized tool result
 * was pruned, are not held while the summary waits for a slot.
 */

setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

/** A summarizer whose calls wait until the test lets them go. */
class HeldSummarizer extends SummarizerDouble {
  readonly #waiting: Array<() => void> = [];

  constructor() {
    super();
    const answer = this.call;
    (this as { call: SummarizerDouble['call'] }).call = async (body, signal) => {
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
      return answer(body, signal);
    };
  }

  get inFlight(): number {
    return this.#waiting.length;
  }

  releaseAll(): void {
    for (const release of this.#waiting.splice(0)) release();
  }
}

describe('a queued background summary', () => {
  it("does not hold the client's original messages (an oversized tool result pruned away) while it waits", async () => {
    const summarizer = new HeldSummarizer();
    const { compactor } = compactorWith({}, { summarizer });
    const signal = new AbortController().signal;
    const holding = compactor.compact({ request: chatRequestView({ model: 'm', messages: conversation({ turns: 20, system: 'Tenant A.' }) }), tenant: 'tenant-A', signal });
    await vi.waitFor(() => expect(summarizer.inFlight).toBe(1));

    const queueOne = async (): Promise<{ original: WeakRef<ChatMessage>; prepared: boolean }> => {
      const messages = conversation({ turns: 12, system: 'Tenant B.' });
      const index = messages.findIndex((message) => message.role === 'tool');
      const oversized: ChatMessage = { ...messages[index]!, content: 'x'.repeat(400_000) } as ChatMessage;
      messages[index] = oversized;
      const prepared = await compactor.compact({ request: chatRequestView({ model: 'm', messages }), tenant: 'tenant-B', signal });
      prepared.afterResponse?.();
      return { original: new WeakRef(oversized), prepared: prepared.afterResponse !== undefined };
    };
    const { original, prepared } = await queueOne();
    expect(prepared, 'the soft-zone request prepares its next epoch in the background').toBe(true);
    await vi.waitFor(() => expect(compactor.queuedSummaries).toBe(1));
    await new Promise((resolve) => setTimeout(resolve, 10));
    collectGarbage();
    expect(original.deref(), 'the original oversized result, held by the queued summary').toBeUndefined();
    summarizer.releaseAll();
    await holding;
  });
});
