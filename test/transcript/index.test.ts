import { describe, it, expect } from 'vitest';
import * as transcript from '../../src/transcript/index.js';

describe('compactor/transcript', () => {
  it('exports the public surface of the transcript core', () => {
    const names = [
      'estimateTokens',
      'estimateMessagesTokens',
      'estimateMessageTokens',
      'estimateRequestTokens',
      'estimateToolsTokens',
      'FRAMING_TOKENS_PER_MESSAGE',
      'pruneToolResults',
      'pruneText',
      'balanceToolCallBoundary',
      'splitTurns',
      'findPairProblems',
      'repairPairs',
      'describePairProblem',
      'mark',
      'isMarked',
      'renderTranscript',
      'ChatMessageSchema',
      'ChatMessagesSchema',
      'ToolCallSchema',
      'ContentPartSchema',
      'contentText',
      'toolCallsOf',
    ];
    for (const name of names) expect(transcript, name).toHaveProperty(name);
  });
});
