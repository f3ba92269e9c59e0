import { type ChatMessage, toolCallsOf } from '../message.js';
import { type CallKind, shellCommandOf, shellKind } from './shell-commands.js';

/**
 * The tool call each tool result answers, and what kind of call it is: a
 * read (a file's text, which the model edits next), an idempotent command
 * (a test run, a build, a listing, a search: run again, it shows the state
 * now), or anything else (output that differs by design from one call to the
 * next, or a tool compactor does not recognize). Only reads and commands are
 * ever superseded or kept once as an identical copy; only commands are
 * trimmed by structure; when in doubt a call is `other` and its text stays.
 */

export type { CallKind };

export interface CallInfo {
  readonly id: string;
  readonly name: string;
  /** `name` and the canonical arguments: equal for two calls of the same tool with the same arguments. */
  readonly key: string;
  /** The parsed arguments when they are a JSON object, else null. */
  readonly arguments: Readonly<Record<string, unknown>> | null;
  readonly kind: CallKind;
  /** For a read of a file of the working tree: its path (as the call wrote it), else null. */
  readonly file: string | null;
}

/**
 * For each tool result of the history, by its index, the call it answers:
 * the call with its id in the nearest preceding assistant message (its
 * step). Agents reuse ids across turns (`call_0` every turn), so an id alone
 * names no call outside its step; a result whose step has no call of its id
 * answers none.
 */
export function callsOfResults(messages: readonly ChatMessage[], readTools: readonly string[] = DEFAULT_READ_TOOLS): ReadonlyMap<number, CallInfo> {
  const calls = new Map<number, CallInfo>();
  let step = new Map<string, CallInfo>();
  messages.forEach((message, index) => {
    if (message.role === 'assistant') {
      step = new Map();
      for (const call of toolCallsOf(message)) {
        // A repeated id within one step keeps its first call, as the pair check does.
        if (step.has(call.id)) continue;
        step.set(call.id, callInfo(call.id, call.function.name, call.function.arguments ?? '', readTools));
      }
      return;
    }
    if (message.role !== 'tool' || typeof message.tool_call_id !== 'string') return;
    const call = step.get(message.tool_call_id);
    if (call !== undefined) calls.set(index, call);
  });
  return calls;
}

function callInfo(id: string, name: string, raw: string, readTools: readonly string[]): CallInfo {
  const parsed = parseObject(raw);
  const canonical = parsed === null ? raw.trim() : canonicalJson(parsed);
  const { kind, file } = classify({ name, arguments: parsed }, readTools);
  return { id, name, key: `${name}\u0000${canonical}`, arguments: parsed, kind, file };
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
/** Argument names that say only which part of it, which version, or how: a call with nothing else besides a path reads. */
const RANGE_ARGUMENTS = new Set(['offset', 'limit', 'start_line', 'end_line', 'line', 'lines', 'line_start', 'line_end', 'view_range', 'max_length', 'start_index', 'encoding', 'ref', 'revision', 'rev', 'branch', 'commit', 'sha', 'version', 'owner', 'repo']);
/** Arguments that name a version other than the working tree's: such a read shows a file, but not the one being edited. */
const VERSION_ARGUMENTS = new Set(['ref', 'revision', 'rev', 'branch', 'commit', 'sha', 'version']);
/**
 * Arguments of calls whose output differs by design from one call to the
 * next with the same arguments: a background shell's new output
 * (`BashOutput {bash_id}`), a cursor's next page, a stream's next chunk.
 * Such a call is never a read nor a command, whatever else it carries.
 */
const CURSOR_ARGUMENTS = new Set(['bash_id', 'shell_id', 'process_id', 'pid', 'session_id', 'stream_id', 'job_id', 'task_id', 'cursor', 'page_token', 'next_page_token', 'next_token', 'continuation_token', 'after', 'since']);
/** Tools that list or search (their output is the state now, like `ls` and `grep`): names as agents give them, or `list_*`, `search_*`, `find_*`. */
const LISTING_TOOLS = /^(grep|glob|ls|list|find|ripgrep|rg|tree|search|list_dir|list_directory|list_files|search_files|search_file_content|file_search|codebase_search|find_files)$|^(list|search|find)_/i;
/** Editor tools that show a file with `command: "view"` (Anthropic's text editor tool, SWE-agent's `str_replace_editor`). */
const EDITOR_VIEW = 'view';

/**
 * What kind of call this is, and for a read of a working-tree file, which.
 *
 * @example
 * classify({ name: 'get_file', arguments: { path: 'a.py', ref: 'main' } }) // → { kind: 'read', file: null } (another version)
 * classify({ name: 'bash', arguments: { command: 'cd src && cat billing.py' } }) // → { kind: 'read', file: 'src/billing.py' }
 * classify({ name: 'BashOutput', arguments: { bash_id: 'b1' } }) // → { kind: 'other', file: null }
 */
export function classify(call: { readonly name: string; readonly arguments: Readonly<Record<string, unknown>> | null }, readTools: readonly string[] = DEFAULT_READ_TOOLS): { kind: CallKind; file: string | null } {
  const args = call.arguments;
  const keys = args === null ? [] : Object.keys(args).map((key) => key.toLowerCase());
  if (keys.some((key) => CURSOR_ARGUMENTS.has(key))) return { kind: 'other', file: null };
  const name = call.name.toLowerCase();
  const path = args === null ? null : pathOf(args);
  const versioned = keys.some((key) => VERSION_ARGUMENTS.has(key));
  if (readTools.some((tool) => tool.toLowerCase() === name)) return { kind: 'read', file: versioned ? null : path };
  if (args !== null && typeof args['command'] === 'string' && args['command'] === EDITOR_VIEW && path !== null) return { kind: 'read', file: path };
  if (path !== null && keys.every((key) => PATH_ARGUMENTS.has(key) || RANGE_ARGUMENTS.has(key))) return { kind: 'read', file: versioned ? null : path };
  const command = args === null ? null : shellCommandOf(args);
  if (command !== null) return shellKind(command);
  if (LISTING_TOOLS.test(name)) return { kind: 'command', file: null };
  return { kind: 'other', file: null };
}

/** The path argument of a call, when it has one that is a string. */
function pathOf(args: Readonly<Record<string, unknown>>): string | null {
  for (const [key, value] of Object.entries(args)) if (PATH_ARGUMENTS.has(key.toLowerCase()) && typeof value === 'string' && value !== '') return value;
  return null;
}

/**
 * Whether a call reads content (a file, a page) rather than runs something:
 * the text of a read is what the model edits next, so a read is only ever
 * replaced whole by a marker pointing at a newer copy, never cut by structure.
 *
 * @example
 * isRead({ name: 'get_source', arguments: { filePath: 'src/a.ts', limit: 200 } }, []) // → true (its arguments' shape)
 * isRead({ name: 'grep', arguments: { pattern: 'x', path: 'src' } }, DEFAULT_READ_TOOLS) // → false (a search, trimmed like a log)
 */
export function isRead(call: { readonly name: string; readonly arguments: Readonly<Record<string, unknown>> | null }, readTools: readonly string[] = DEFAULT_READ_TOOLS): boolean {
  return classify(call, readTools).kind === 'read';
}
