import type { ChatMessage } from '../../../transcript/message.js';
import type { ClearToolUsesEdit, EditTrigger } from '../../../transcript/context-edits.js';
import { headLength } from '../../../transcript/groups.js';
import { clearCallInputs } from '../../../transcript/compress/cleared-inputs.js';
import { type CompressSettings, compressToolResults } from '../../../transcript/compress/compress.js';
import { hasMarker } from '../../../transcript/compress/markers.js';
import { type CompressPlan, resized } from '../compress-tier.js';
import { epochBoundary } from '../plan.js';
import { prunedEpoch } from '../replacement.js';
import { clearedLine, wouldLine } from '../report.js';
import type { ModelFreeTier } from './tier.js';

/**
 * The compression tier's clearing as a client asks for it: Anthropic's
 * `clear_tool_uses_20250919` (context_management, compaction/policy/context-edits.ts).
 * Past its `trigger` (input tokens, or tool uses not yet cleared), every
 * tool result but the newest `keep` of all tools together, except those of
 * `exclude_tools`, becomes the compression's cleared marker (the text is
 * nowhere else: call the tool again), and with `clear_tool_inputs` the
 * calls' inputs too; made only when it frees `clear_at_least` tokens.
 *
 * It is the compression tier under its name (`compress`: its epochs are
 * stored, shared, replayed, counted and shown as compressions), decided once
 * per epoch: once cleared, the candidate is under its trigger again, and the
 * cleared prefix is forwarded byte for byte until the conversation crosses
 * it anew. Not in the built-in list: a request's edits bring it.
 */

export interface ClearPlan extends CompressPlan {
  /** Calls whose inputs were cleared. */
  readonly inputs: number;
}

/** The compression's settings that clear, and do nothing else. */
function clearSettingsOf(edit: ClearToolUsesEdit): CompressSettings {
  return {
    superseded: false,
    identical: false,
    structure: false,
    // Anthropic clears every result past `keep`, whatever its size.
    minResultChars: 0,
    keepItems: 0,
    keepLines: 0,
    clear: { keep: edit.keep, excludeTools: edit.excludeTools, acrossTools: true },
    readTools: [],
  };
}

/** Tool results the candidate holds that no compression marker stands for. */
function unclearedToolUses(messages: readonly ChatMessage[]): number {
  return messages.filter((message) => message.role === 'tool' && !(typeof message.content === 'string' && hasMarker(message.content))).length;
}

export function triggered(trigger: EditTrigger, total: number, messages: readonly ChatMessage[]): boolean {
  return trigger.type === 'input_tokens' ? total >= trigger.value : unclearedToolUses(messages) >= trigger.value;
}

/** Calls whose arguments differ between two versions of the same history. */
function changedCalls(before: readonly ChatMessage[], after: readonly ChatMessage[]): number {
  let count = 0;
  after.forEach((message, index) => {
    const old = before[index]!;
    if (message === old) return;
    (message.tool_calls ?? []).forEach((call, position) => {
      if (call.function?.arguments !== old.tool_calls?.[position]?.function?.arguments) count++;
    });
  });
  return count;
}

/** The history with the edit's clearing made (its trigger not asked): the input array itself when there is nothing to clear. */
export function clearedByEdit(edit: ClearToolUsesEdit, messages: readonly ChatMessage[]): readonly ChatMessage[] {
  const clearsInputsOf = (tool: string): boolean => (edit.clearToolInputs === true ? true : edit.clearToolInputs === false ? false : edit.clearToolInputs.includes(tool));
  const compression = compressToolResults(messages, { from: headLength(messages), to: messages.length, settings: clearSettingsOf(edit) });
  if (compression.messages === messages || edit.clearToolInputs === false) return compression.messages;
  return clearCallInputs(compression.messages, compression.compressed.keys(), clearsInputsOf);
}

export function clearToolUsesTier(edit: ClearToolUsesEdit): ModelFreeTier<ClearPlan> {
  return {
    name: 'compress',
    shownAs: 'compress',
    needsModel: false,

    plan({ candidate, sizes, sizeOf, total }) {
      const { messages } = candidate;
      if (!triggered(edit.trigger, total, messages)) return null;
      const cleared = clearedByEdit(edit, messages);
      if (cleared === messages) return null;
      const { size, changed } = resized(messages, cleared, sizes, total, { from: 0, to: messages.length }, sizeOf);
      if (total - size < edit.clearAtLeast) return null;
      const inputs = changedCalls(messages, cleared);
      return { tier: 'compress', cut: messages.length, messages: [...cleared], results: changed - countChangedAssistants(messages, cleared), inputs, size, freed: total - size };
    },

    settles: () => true,

    boundaryOf: (candidate, plan) => epochBoundary(candidate, plan.cut),

    epochOf(hashes, candidate, { plan, boundary }, before) {
      const report = clearedLine({ results: plan.results, inputs: plan.inputs, before, after: plan.size });
      // Its markers say the text is nowhere else; the epoch covers the whole history it was decided on.
      return prunedEpoch(hashes, candidate, plan.messages, boundary, report, { tier: 'compress', seesWholeHistory: true });
    },

    wouldLine: ({ plan }, before) => wouldLine(clearedLine({ results: plan.results, inputs: plan.inputs, before, after: plan.size })),
  };
}

function countChangedAssistants(before: readonly ChatMessage[], after: readonly ChatMessage[]): number {
  return after.filter((message, index) => message !== before[index] && message.role === 'assistant').length;
}
