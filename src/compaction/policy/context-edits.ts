import { type ContextEdits, editOf } from '../../transcript/context-edits.js';
import type { ChatMessage } from '../../transcript/message.js';
import { clearThinking } from '../../transcript/thinking.js';
import { estimateRequestTokens } from '../../transcript/tokens.js';
import type { DecisionSettings } from './decide.js';
import { clearToolUsesTier, clearedByEdit, triggered } from './tiers/clear-tool-uses.js';
import type { CompactionTier, PlanContext, TierList } from './tiers/tier.js';

/**
 * How a client's context edits (Anthropic's `context_management`,
 * transcript/context-edits.ts) map onto compactor's tiers, for one request:
 *
 * - `clear_tool_uses_20250919` is the compression tier's clearing
 *   (tiers/clear-tool-uses.ts), in the compression's place, fired by the
 *   edit's own trigger;
 * - `compact_20260112` is the summary tier, fired by the edit's trigger (or
 *   compactor's own threshold, whichever comes first), its prompt the
 *   edit's `instructions` when given, keeping only the current turn raw (as
 *   Anthropic's summarizes the whole conversation); the answer carries its
 *   notes as a `compaction` block;
 * - every other tier of the list stays as compactor's own safety net, fired
 *   at the configured threshold as always.
 *
 * Each tier checks its own trigger, so the request is always looked up and
 * decided (the threshold is a token above nothing); nothing is prepared in
 * the background for it. What a tier decides is an epoch like any other:
 * decided once, replayed byte for byte until the conversation crosses a
 * trigger again. Its epochs are the conversation's, as any other's: each
 * is a true rewriting of the prefix it covers (its markers say where the
 * text went), so a request without the edits may build on it and the other
 * way round; the dashboard, the learned ratio and the summary queue see one
 * conversation of one tenant.
 * `clear_thinking_20251015` is no tier: it applies to each request's
 * thinking (formats/messages/thinking.ts).
 */

export interface EditedPolicy {
  readonly settings: DecisionSettings;
  readonly tiers: TierList;
  /** The summary prompt the client gave (`compact_20260112`'s `instructions`), when it gave one. */
  readonly summaryInstructions?: string;
}

/** A token above nothing: every request is decided, and each tier asks its own trigger (as observe-mode.ts's `forcedSettings`). */
const EVERY_REQUEST = 1e-6;

/** The tier, fired only at or over `threshold` (tokens, from the context's budget). */
function firedAt(tier: CompactionTier, threshold: (context: PlanContext) => number): CompactionTier {
  return { ...tier, plan: (context, before) => (context.total >= threshold(context) ? tier.plan(context, before) : null) } as CompactionTier;
}

export function editedPolicy(configured: DecisionSettings, edits: ContextEdits, tiers: TierList): EditedPolicy {
  const clear = editOf(edits, 'clear_tool_uses_20250919');
  const compact = editOf(edits, 'compact_20260112');
  // compactor's own threshold: a tier that is not an edit's fires there, as without edits.
  const own = (context: PlanContext): number => (context.budget === null ? Number.POSITIVE_INFINITY : configured.threshold * context.budget);
  const edited: CompactionTier[] = [];
  for (const tier of tiers) {
    if (tier.name === 'compress' && clear !== undefined) edited.push(clearToolUsesTier(clear) as unknown as CompactionTier);
    else if (tier.name === 'summary' && compact !== undefined) edited.push(firedAt(tier, (context) => Math.min(compact.trigger.value, own(context))));
    else edited.push(firedAt(tier, own));
  }
  // Anthropic's compaction summarizes the whole conversation: only the current turn stays raw (a summary keeps at least one),
  // so the follow-up read from the compaction block (the notes, then the answer) shares the notes with this prompt.
  const keepRecent = compact === undefined ? configured.keepRecent : 0;
  const settings = { ...configured, threshold: EVERY_REQUEST, softThreshold: EVERY_REQUEST, keepRecent };
  return { settings, tiers: edited, ...(compact?.instructions == null ? {} : { summaryInstructions: compact.instructions }) };
}

/**
 * What the edits leave of a history when only counted (`/v1/messages/count_tokens`):
 * the clearing past its trigger (measured against `inputTokens`, the
 * upstream's count of the history as sent) when it frees `clear_at_least`,
 * and the thinking cleared. No summary is written for a count: a
 * `compact_20260112` edit counts the history as it stands (its epoch, once
 * written, is the next /v1/messages request's).
 */
export function editedForCount(edits: ContextEdits, messages: readonly ChatMessage[], inputTokens: number): readonly ChatMessage[] {
  let out = messages;
  const clear = editOf(edits, 'clear_tool_uses_20250919');
  if (clear !== undefined && triggered(clear.trigger, inputTokens, out)) {
    const cleared = clearedByEdit(clear, out);
    const estimate = estimateRequestTokens({ messages: out });
    const freed = estimate === 0 ? 0 : ((estimate - estimateRequestTokens({ messages: cleared })) * inputTokens) / estimate;
    if (freed >= clear.clearAtLeast) out = cleared;
  }
  const thinking = editOf(edits, 'clear_thinking_20251015');
  if (thinking !== undefined) out = clearThinking(out, thinking.keep).messages;
  return out;
}
