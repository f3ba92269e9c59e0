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

/**
 * Tool names that read a file or show a resource, as coding agents name them
 * (opencode `read`, qwen-code and Gemini CLI `read_file`, Claude Code `Read`,
 * Aider-style `view`, `cat`, `open_file`): the default of
 * `compaction.compress.read_tools`, compared without case.
 */
export const DEFAULT_READ_TOOLS: readonly string[] = ['read', 'read_file', 'read_many_files', 'view', 'view_file', 'open', 'open_file', 'cat', 'fetch', 'web_fetch', 'get_file_contents'];

/** Argument names that say which file a call shows. */
const PATH_ARGUMENTS = new Set(['path', 'file_path', 'filepath', 'absolute_path', 'filename', 'file', 'uri', 'url']);
/** Argument names that say only which part of it, or how: a call with nothing else besides a path reads. */
const RANGE_ARGUMENTS = new Set(['offset', 'limit', 'start_line', 'end_line', 'line', 'lines', 'line_start', 'line_end', 'view_range', 'encoding', 'max_length', 'start_index']);
/** Shell commands that print a file. */
const READ_COMMAND = /^\s*(cat|head|tail|less|more|bat|nl|sed\s+-n|type|Get-Content)\b/;

/**
 * Whether a call reads content (a file, a page) rather than runs something:
 * the text of a read is what the model edits next, so a read is only ever
 * replaced whole by a marker pointing at a newer copy, never cut by structure.
 * Known by its tool's name (`readTools`), by the shape of its arguments (a
 * path and at most which lines of it, whatever the tool is called), or by a
 * shell command that prints a file.
 *
 * @example
 * isRead({ name: 'get_source', arguments: { filePath: 'src/a.ts', limit: 200 } }, []) // → true (its arguments' shape)
 * isRead({ name: 'grep', arguments: { pattern: 'x', path: 'src' } }, DEFAULT_READ_TOOLS) // → false (a search, trimmed like a log)
 */
export function isRead(call: Pick<CallInfo, 'name' | 'arguments'>, readTools: readonly string[] = DEFAULT_READ_TOOLS): boolean {
  const name = call.name.toLowerCase();
  if (readTools.some((tool) => tool.toLowerCase() === name)) return true;
  const args = call.arguments;
  if (args === null) return false;
  const keys = Object.keys(args).map((key) => key.toLowerCase());
  if (keys.some((key) => PATH_ARGUMENTS.has(key)) && keys.every((key) => PATH_ARGUMENTS.has(key) || RANGE_ARGUMENTS.has(key))) return true;
  for (const value of Object.values(args)) if (typeof value === 'string' && READ_COMMAND.test(value)) return true;
  return false;
}
