/**
 * The edits a client asks compactor to make to its context, in the words of
 * the API that has them: Anthropic's `context_management.edits` on
 * `/v1/messages` (beta `context-management-2025-06-27`, and
 * `compact-2026-01-12` for the compaction). The Messages format reads them
 * (formats/messages/context-management.ts, every default filled in there);
 * the compaction policy maps them onto its tiers
 * (compaction/policy/context-edits.ts). Plain data: no format, no tier.
 */

/** When an edit fires: the request's input tokens, or the tool uses in its context, at or over `value`. */
export interface EditTrigger {
  readonly type: 'input_tokens' | 'tool_uses';
  readonly value: number;
}

/** `clear_tool_uses_20250919`: the oldest tool results (and, asked, their calls' inputs) cleared, the newest `keep` tool uses kept. */
export interface ClearToolUsesEdit {
  readonly type: 'clear_tool_uses_20250919';
  readonly trigger: EditTrigger;
  /** Tool uses kept, the newest (Anthropic's default: 3). */
  readonly keep: number;
  /** Tokens a clearing must free to be made at all (default 0). */
  readonly clearAtLeast: number;
  /** Tools whose uses are never cleared. */
  readonly excludeTools: readonly string[];
  /** Whether the cleared uses' inputs are cleared too: all (true), none (false), or those of the tools named. */
  readonly clearToolInputs: boolean | readonly string[];
}

/** `clear_thinking_20251015`: thinking blocks cleared from all but the last `keep` assistant turns (`all`: none cleared). */
export interface ClearThinkingEdit {
  readonly type: 'clear_thinking_20251015';
  readonly keep: number | 'all';
}

/** `compact_20260112`: past `trigger` input tokens, the history summarized; the answer carries the notes as a `compaction` block. */
export interface CompactEdit {
  readonly type: 'compact_20260112';
  readonly trigger: EditTrigger;
  /** Answer with the `compaction` block alone (stop reason `compaction`), the model not asked. */
  readonly pauseAfterCompaction: boolean;
  /** Replaces the summary prompt, when set. */
  readonly instructions: string | null;
}

export type ContextEdit = ClearToolUsesEdit | ClearThinkingEdit | CompactEdit;

export interface ContextEdits {
  /** The edits in the client's order. */
  readonly edits: readonly ContextEdit[];
  /** The edits' canonical text, their defaults filled in. */
  readonly key: string;
}

/** What one edit did to a request, as Anthropic's `applied_edits` reports it. */
export type AppliedEdit =
  | { readonly type: 'clear_tool_uses_20250919'; readonly cleared_tool_uses: number; readonly cleared_input_tokens: number }
  | { readonly type: 'clear_thinking_20251015'; readonly cleared_thinking_turns: number; readonly cleared_input_tokens: number };

export function editOf<T extends ContextEdit['type']>(edits: ContextEdits | undefined, type: T): Extract<ContextEdit, { type: T }> | undefined {
  return edits?.edits.find((edit): edit is Extract<ContextEdit, { type: T }> => edit.type === type);
}

/** What a request's edits add to its answer: the `applied_edits`, and the `compaction` block's notes when the prompt starts from a summary. */
export interface AnswerEdits {
  readonly applied: readonly AppliedEdit[];
  /** The notes of the summary the forwarded prompt starts from (`compact_20260112`): the answer's `compaction` block. */
  readonly compaction?: string;
  /** `pause_after_compaction` and a compaction made now: the answer is the `compaction` block alone, the model not asked. */
  readonly pause?: boolean;
}
