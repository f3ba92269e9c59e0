import { TooManyItemsError } from '../errors.js';

/**
 * The planning work of a request, capped (issue 21 item 2): every pass over
 * a request is linear in its messages, tool calls and content parts, so
 * their count bounds how long the event loop is held. A 32 MiB body of
 * small messages holds ~540k of them, seconds of work for every client
 * waiting on this process; past `limits.max_items` the request is refused
 * with a 413 before any pair check or plan. Counted with an early stop, so
 * refusing costs no more than the limit.
 */

function lengthOf(value: unknown): number {
  return Array.isArray(value) ? value.length : 0;
}

/** Throws a {@link TooManyItemsError} when `entries` (messages or input items) carry more than `limit` items. */
export function checkPlanningItems(entries: unknown, limit: number): void {
  if (!Array.isArray(entries)) return;
  if (entries.length > limit) throw new TooManyItemsError(limit);
  let items = 0;
  for (const entry of entries) {
    items++;
    if (typeof entry === 'object' && entry !== null) {
      const record = entry as Record<string, unknown>;
      items += lengthOf(record['content']) + lengthOf(record['tool_calls']);
    }
    if (items > limit) throw new TooManyItemsError(limit);
  }
}
