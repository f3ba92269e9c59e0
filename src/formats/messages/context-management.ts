import { InvalidRequestError } from '../../errors.js';
import type { ClearThinkingEdit, ClearToolUsesEdit, CompactEdit, ContextEdit, ContextEdits, EditTrigger } from '../../transcript/context-edits.js';
import { isRecord } from '../origin.js';

/**
 * Anthropic's `context_management` of a Messages request, read with the
 * defaults Anthropic documents (docs.claude.com, "Context editing" and
 * "Compaction"; the types of `@anthropic-ai/sdk`'s beta messages):
 *
 * - `clear_tool_uses_20250919`: `trigger` input_tokens 100,000, `keep`
 *   3 tool_uses, `clear_at_least` none, `exclude_tools` none,
 *   `clear_tool_inputs` false;
 * - `clear_thinking_20251015`: `keep` 1 thinking_turns (`"all"` or
 *   `{type: "all"}` keeps every one);
 * - `compact_20260112`: `trigger` input_tokens 150,000,
 *   `pause_after_compaction` false, `instructions` none. Anthropic refuses a
 *   trigger under 50,000; compactor takes any, since local windows are
 *   often smaller than that.
 *
 * Strict where Anthropic is: an unknown edit type, an unknown field or a
 * value of the wrong kind is a 400 naming the field
 * (`context_management.edits[0].keep.value`); nothing is forwarded.
 */

export const CONTEXT_MANAGEMENT_KEY = 'context_management';

const DEFAULT_CLEAR_TRIGGER = 100_000;
const DEFAULT_CLEAR_KEEP = 3;
const DEFAULT_THINKING_KEEP = 1;
const DEFAULT_COMPACT_TRIGGER = 150_000;

function invalid(param: string, message: string): InvalidRequestError {
  return new InvalidRequestError({ code: 'invalid_body', message: `${param}: ${message}`, param });
}

function objectAt(value: unknown, param: string, fields: readonly string[]): Record<string, unknown> {
  if (!isRecord(value)) throw invalid(param, 'must be an object');
  for (const key of Object.keys(value)) if (!fields.includes(key)) throw invalid(`${param}.${key}`, 'is not a field of this object');
  return value;
}

function countAt(value: unknown, param: string, least: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < least) throw invalid(param, `must be an integer of at least ${least}`);
  return value;
}

/** `{type, value}` with `type` one of `types`. */
function measureAt<T extends string>(value: unknown, param: string, types: readonly T[], least: number): { type: T; value: number } {
  const measure = objectAt(value, param, ['type', 'value']);
  if (!types.includes(measure['type'] as T)) throw invalid(`${param}.type`, `must be ${types.map((type) => `"${type}"`).join(' or ')}`);
  return { type: measure['type'] as T, value: countAt(measure['value'], `${param}.value`, least) };
}

function stringsAt(value: unknown, param: string): string[] {
  if (!Array.isArray(value) || !value.every((item) => typeof item === 'string')) throw invalid(param, 'must be a list of strings');
  return value as string[];
}

function clearToolUses(edit: Record<string, unknown>, param: string): ClearToolUsesEdit {
  objectAt(edit, param, ['type', 'trigger', 'keep', 'clear_at_least', 'exclude_tools', 'clear_tool_inputs']);
  const trigger: EditTrigger = edit['trigger'] === undefined ? { type: 'input_tokens', value: DEFAULT_CLEAR_TRIGGER } : measureAt(edit['trigger'], `${param}.trigger`, ['input_tokens', 'tool_uses'], 1);
  const keep = edit['keep'] === undefined ? DEFAULT_CLEAR_KEEP : measureAt(edit['keep'], `${param}.keep`, ['tool_uses'], 0).value;
  const atLeast = edit['clear_at_least'];
  const clearAtLeast = atLeast === undefined || atLeast === null ? 0 : measureAt(atLeast, `${param}.clear_at_least`, ['input_tokens'], 0).value;
  const exclude = edit['exclude_tools'];
  const excludeTools = exclude === undefined || exclude === null ? [] : stringsAt(exclude, `${param}.exclude_tools`);
  const inputs = edit['clear_tool_inputs'];
  let clearToolInputs: boolean | string[] = false;
  if (typeof inputs === 'boolean') clearToolInputs = inputs;
  else if (inputs !== undefined && inputs !== null) clearToolInputs = stringsAt(inputs, `${param}.clear_tool_inputs`);
  return { type: 'clear_tool_uses_20250919', trigger, keep, clearAtLeast, excludeTools, clearToolInputs };
}

function clearThinking(edit: Record<string, unknown>, param: string): ClearThinkingEdit {
  objectAt(edit, param, ['type', 'keep']);
  const keep = edit['keep'];
  if (keep === undefined) return { type: 'clear_thinking_20251015', keep: DEFAULT_THINKING_KEEP };
  if (keep === 'all' || (isRecord(keep) && keep['type'] === 'all' && Object.keys(keep).length === 1)) return { type: 'clear_thinking_20251015', keep: 'all' };
  return { type: 'clear_thinking_20251015', keep: measureAt(keep, `${param}.keep`, ['thinking_turns'], 1).value };
}

function compact(edit: Record<string, unknown>, param: string): CompactEdit {
  objectAt(edit, param, ['type', 'trigger', 'pause_after_compaction', 'instructions']);
  const trigger: EditTrigger = edit['trigger'] === undefined || edit['trigger'] === null ? { type: 'input_tokens', value: DEFAULT_COMPACT_TRIGGER } : measureAt(edit['trigger'], `${param}.trigger`, ['input_tokens'], 1);
  const pause = edit['pause_after_compaction'];
  if (pause !== undefined && pause !== null && typeof pause !== 'boolean') throw invalid(`${param}.pause_after_compaction`, 'must be a boolean');
  const instructions = edit['instructions'];
  if (instructions !== undefined && instructions !== null && (typeof instructions !== 'string' || instructions === '')) throw invalid(`${param}.instructions`, 'must be a non-empty string');
  return { type: 'compact_20260112', trigger, pauseAfterCompaction: pause === true, instructions: typeof instructions === 'string' ? instructions : null };
}

const EDIT_READERS: Readonly<Record<ContextEdit['type'], (edit: Record<string, unknown>, param: string) => ContextEdit>> = {
  clear_tool_uses_20250919: clearToolUses,
  clear_thinking_20251015: clearThinking,
  compact_20260112: compact,
};

/**
 * The body's `context_management`, its defaults filled in; undefined when
 * it has none (or `null`, or no edits). Throws a 400 naming the first field
 * that is wrong.
 */
export function readContextManagement(body: Record<string, unknown>): ContextEdits | undefined {
  const value = body[CONTEXT_MANAGEMENT_KEY];
  if (value === undefined || value === null) return undefined;
  const config = objectAt(value, CONTEXT_MANAGEMENT_KEY, ['edits']);
  const list = config['edits'];
  if (list === undefined || list === null) return undefined;
  if (!Array.isArray(list)) throw invalid(`${CONTEXT_MANAGEMENT_KEY}.edits`, 'must be a list of edits');
  const edits: ContextEdit[] = [];
  for (const [index, edit] of list.entries()) {
    const param = `${CONTEXT_MANAGEMENT_KEY}.edits[${index}]`;
    if (!isRecord(edit)) throw invalid(param, 'must be an object');
    const reader = Object.hasOwn(EDIT_READERS, String(edit['type'])) ? EDIT_READERS[edit['type'] as ContextEdit['type']] : undefined;
    if (reader === undefined) throw invalid(`${param}.type`, `must be one of ${Object.keys(EDIT_READERS).map((type) => `"${type}"`).join(', ')}`);
    if (edits.some((earlier) => earlier.type === edit['type'])) throw invalid(`${param}.type`, `"${String(edit['type'])}" is given twice`);
    edits.push(reader(edit, param));
  }
  if (edits.length === 0) return undefined;
  return { edits, key: JSON.stringify(edits) };
}
