import { describe, expect, it } from 'vitest';
import { budgetOf } from '../../src/compaction/policy/budget.js';
import { skipsLookup } from '../../src/compaction/policy/decide.js';
import { INITIAL_TOKEN_RATIO } from '../../src/compaction/sizes/token-ratio.js';
import type { ChatMessage } from '../../src/transcript/message.js';
import { estimateRequestTokens } from '../../src/transcript/tokens.js';
import { conversation } from '../support/conversation.js';
import { compactorWith, configWith } from '../support/compaction.js';
import { chatRequestView } from '../../src/formats/chat/read.js';

const signal = new AbortController().signal;

/** The doubles' 8k window with the default configuration: a 7168-token budget, soft threshold 0.6, max_messages off. */
const { compaction, models } = configWith();
const budget = budgetOf(8192, undefined, models['*']?.reserve_output_tokens ?? 1024, 1024);
const settings = { softThreshold: compaction.soft_threshold, maxMessages: compaction.max_messages };

/** The size the engine checks the fast path with: the estimate at the initial ratio (nothing learned yet). */
const sizeOf = (messages: readonly ChatMessage[]): number => estimateRequestTokens({ messages }) * INITIAL_TOKEN_RATIO;

describe('CompactionEngine.prepare fast path', () => {
  it('hashes nothing while the raw estimate is under the soft threshold', async () => {
    const messages = conversation({ turns: 3 });
    expect(skipsLookup(sizeOf(messages), messages.length, budget, settings)).toBe(true);
    const { compactor } = compactorWith();
    const prepared = await compactor.compact({ request: chatRequestView({ model: 'm', messages }), tenant: '', signal });
    expect(prepared.messages).toBe(messages);
  });

  it('hashes the history once it is over the soft threshold', () => {
    // 14 turns: above the soft threshold (0.6 × 7168) and under the threshold (0.85 × 7168).
    const messages = conversation({ turns: 14 });
    expect(skipsLookup(sizeOf(messages), messages.length, budget, settings)).toBe(false);
  });

  it('hashes a history under the soft threshold when max_messages counts it over', () => {
    const messages = conversation({ turns: 3 });
    expect(skipsLookup(sizeOf(messages), messages.length, budget, { ...settings, maxMessages: 4 })).toBe(false);
  });
});
