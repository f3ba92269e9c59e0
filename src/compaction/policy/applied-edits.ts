import { type AnswerEdits, type AppliedEdit, type ContextEdits, editOf } from '../../transcript/context-edits.js';
import { CLEARED_INPUT_KEY } from '../../transcript/compress/cleared-inputs.js';
import { isClearedMarker } from '../../transcript/compress/markers.js';
import { type ChatMessage, contentText } from '../../transcript/message.js';
import { clearThinking } from '../../transcript/thinking.js';
import { estimateTokens } from '../../transcript/tokens.js';

/**
 * What a request's context edits did, in Anthropic's `applied_edits` words,
 * read off what is forwarded: every cleared tool result in the forwarded
 * prompt (this request's clearing and the epoch's before it: the client's
 * history holds them all, as Anthropic reports on a stateless request),
 * the thinking cleared, and the compaction's notes. Pure.
 */

/** The forwarded prompt's cleared tool uses, and the tokens they freed where the client's copy stands at the same place. */
function clearedToolUses(original: readonly ChatMessage[], forwarded: readonly ChatMessage[]): { uses: number; tokens: number } {
  const clients = new Set(original);
  let uses = 0;
  let tokens = 0;
  forwarded.forEach((message, index) => {
    if (clients.has(message)) return;
    const before = original[index];
    if (message.role === 'tool') {
      const text = contentText(message.content);
      if (!isClearedMarker(text)) return;
      uses++;
      if (before?.role === 'tool' && before.tool_call_id === message.tool_call_id) tokens += Math.max(0, estimateTokens(contentText(before.content)) - estimateTokens(text));
      return;
    }
    for (const call of message.tool_calls ?? []) {
      const args = call.function?.arguments ?? '';
      if (!args.includes(`"${CLEARED_INPUT_KEY}"`)) continue;
      const old = before?.tool_calls?.find((candidate) => candidate.id === call.id)?.function?.arguments;
      if (old !== undefined && old !== args) tokens += Math.max(0, estimateTokens(old) - estimateTokens(args));
    }
  });
  return { uses, tokens };
}

export interface EditedAnswer {
  /** What is forwarded: the thinking cleared from it, when `clear_thinking` cleared some. */
  readonly messages: readonly ChatMessage[];
  readonly answer: AnswerEdits;
}

/**
 * The edits' report for one request, and the forwarded messages with their
 * thinking cleared. `ratio`: the learned real tokens per estimated token.
 * `compaction`: the notes the prompt starts from, and whether this request
 * wrote them.
 */
export function editedAnswer(
  edits: ContextEdits,
  original: readonly ChatMessage[],
  forwarded: readonly ChatMessage[],
  ratio: number,
  compaction: { readonly notes: string | undefined; readonly writtenNow: boolean },
): EditedAnswer {
  const applied: AppliedEdit[] = [];
  let messages = forwarded;
  for (const edit of edits.edits) {
    if (edit.type === 'clear_tool_uses_20250919') {
      const cleared = clearedToolUses(original, forwarded);
      if (cleared.uses > 0) applied.push({ type: edit.type, cleared_tool_uses: cleared.uses, cleared_input_tokens: Math.round(cleared.tokens * ratio) });
    } else if (edit.type === 'clear_thinking_20251015') {
      const cleared = clearThinking(messages, edit.keep);
      messages = cleared.messages;
      if (cleared.turns > 0) applied.push({ type: edit.type, cleared_thinking_turns: cleared.turns, cleared_input_tokens: Math.round(cleared.tokens * ratio) });
    }
  }
  const compact = editOf(edits, 'compact_20260112');
  const notes = compact === undefined ? undefined : compaction.notes;
  const pause = compact?.pauseAfterCompaction === true && notes !== undefined && compaction.writtenNow;
  return { messages, answer: { applied, ...(notes === undefined ? {} : { compaction: notes }), ...(pause ? { pause } : {}) } };
}
