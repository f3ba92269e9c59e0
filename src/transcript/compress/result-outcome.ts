import type { ChatMessage } from '../message.js';

/**
 * Whether a tool result is a successful, non-empty copy of what its call
 * shows: only such a result supersedes an older one, or holds a text others
 * are kept once in. A page that failed with a 503 after it was fetched fine,
 * a read that answered "Error: …", a command that exited non-zero, an empty
 * answer: each says nothing about the content the older copy holds.
 */

/** A first line that reports a failure: `Error: …`, `error: …`, `HTTP/1.1 503 …`, `503 Service Unavailable`, `Request failed with status code 503`. */
const FAILED_FIRST_LINE = /^\s*(\[?(error|fatal|failed|failure|exception|traceback)\b|(HTTP\/[\d.]+\s+)?[45]\d\d(\s+[A-Z][\w -]*)?\s*$|.*\bstatus(\s+code)?:?\s+[45]\d\d\b|.*\b[45]\d\d (service unavailable|bad gateway|gateway timeout|internal server error|not found|forbidden|unauthorized|too many requests)\b)/i;
/** A line that reports a non-zero exit: `exit code 1`, `Exit code: 2`, `exited with code 127`, `exit status 1`, `Command failed`. */
const NON_ZERO_EXIT = /\b(exit(ed)?( with)?( code| status):?\s*[1-9]\d*|command failed|non-zero exit)\b/i;

/** How many lines at each end of a result are read for an exit status (the shell tools of agents put it first or last). */
const EXIT_LINES = 3;

/** Whether `message` (a tool result with text `text`) succeeded and holds something. */
export function succeeded(message: ChatMessage, text: string): boolean {
  if (text.trim() === '') return false;
  // The Messages API's `is_error` on a tool_result, carried on the view (formats/messages/read.ts); some clients send it on chat.
  if (message['is_error'] === true || message['isError'] === true) return false;
  const lines = text.split('\n');
  if (FAILED_FIRST_LINE.test(lines.find((line) => line.trim() !== '') ?? '')) return false;
  const ends = [...lines.slice(0, EXIT_LINES), ...lines.slice(-EXIT_LINES)];
  return !ends.some((line) => NON_ZERO_EXIT.test(line));
}
