import { type ChatMessage, toolCallsOf } from '../message.js';

/**
 * The tool calls of a history, by id: which tool, and its arguments in a
 * canonical form, so "the same call" means the same tool with the same
 * arguments whatever the key order or spacing of the JSON the model wrote.
 */

export interface CallInfo {
  readonly name: string;
  /** `name` and the canonical arguments: equal for two calls of the same tool with the same arguments. */
  readonly key: string;
  /** The parsed arguments when they are a JSON object, else null. */
  readonly arguments: Readonly<Record<string, unknown>> | null;
}

/** Every call of every assistant message, by its id (a repeated id keeps its first call). */
export function callsById(messages: readonly ChatMessage[]): ReadonlyMap<string, CallInfo> {
  const calls = new Map<string, CallInfo>();
  for (const message of messages) {
    for (const call of toolCallsOf(message)) {
      if (calls.has(call.id)) continue;
      const raw = call.function.arguments ?? '';
      const parsed = parseObject(raw);
      const canonical = parsed === null ? raw.trim() : canonicalJson(parsed);
      calls.set(call.id, { name: call.function.name, key: `${call.function.name}\u0000${canonical}`, arguments: parsed });
    }
  }
  return calls;
}

function parseObject(text: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** JSON with object keys in sorted order, at every depth. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** Tool names that read a file or show a resource: their results are content, never trimmed by structure (only superseded). */
const READ_TOOL = /read|view|cat|open|show|fetch|file/i;
/** Shell commands that print a file. */
const READ_COMMAND = /^\s*(cat|head|tail|less|more|bat|nl|sed\s+-n|type|Get-Content)\b/;

/**
 * Whether a call reads content (a file, a page) rather than runs something:
 * the text of a read is what the model edits next, so a read is only ever
 * replaced whole by a marker pointing at a newer copy, never cut by structure.
 */
export function isRead(call: CallInfo): boolean {
  if (READ_TOOL.test(call.name)) return true;
  const args = call.arguments;
  if (args === null) return false;
  for (const value of Object.values(args)) if (typeof value === 'string' && READ_COMMAND.test(value)) return true;
  return false;
}
