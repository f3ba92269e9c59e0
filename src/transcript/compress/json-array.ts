import { droppedItemsMarker, MARKER_PREFIX } from './markers.js';

/**
 * JSON tool output trimmed by its structure (Headroom's SmartCrusher keeps
 * the first, last, error and outlier items): an array keeps its first and
 * last `keepItems` items and every item that looks like an error, and each
 * run of dropped items becomes one string item saying how many went. An
 * object is trimmed in its array-valued fields (one level down), so
 * `{"results": [...], "total": 120}` keeps its other fields as they were.
 */

/** Words that make an item worth keeping wherever it is: the model acts on failures. */
const ERROR_LIKE = /\b(error|errors|failed|failure|fail|exception|fatal|panic|denied|invalid|timeout|critical)\b/i;

/** Whether an item looks like an error (any of its text, or a status from 400 up). */
function isErrorLike(item: unknown): boolean {
  const text = typeof item === 'string' ? item : JSON.stringify(item);
  if (text === undefined) return false;
  if (text.includes(MARKER_PREFIX) || ERROR_LIKE.test(text)) return true;
  if (typeof item === 'object' && item !== null && !Array.isArray(item)) {
    const status = (item as Record<string, unknown>)['status'] ?? (item as Record<string, unknown>)['status_code'] ?? (item as Record<string, unknown>)['code'];
    if (typeof status === 'number' && status >= 400 && status < 600) return true;
  }
  return false;
}

/** The array with its middle dropped, the error-like items kept in place; the same array when nothing would go. */
function trimArray(items: readonly unknown[], keepItems: number): readonly unknown[] {
  if (items.length <= 2 * keepItems + 1) return items;
  const kept: unknown[] = [];
  let dropped = 0;
  for (let index = 0; index < items.length; index++) {
    const item = items[index];
    const edge = index < keepItems || index >= items.length - keepItems;
    if (edge || isErrorLike(item)) {
      if (dropped > 0) kept.push(droppedItemsMarker(dropped));
      dropped = 0;
      kept.push(item);
    } else dropped++;
  }
  if (dropped > 0) kept.push(droppedItemsMarker(dropped));
  return kept.length === items.length ? items : kept;
}

/** The indentation the text was written with (JSON.stringify's `space`), so the trimmed copy reads like the original. */
function indentOf(text: string): number | string {
  const match = /\n([ \t]+)["{[\d\-tfn]/.exec(text);
  if (match === null) return 0;
  const indent = match[1]!;
  return indent.startsWith('\t') ? '\t' : indent.length;
}

/**
 * The JSON text trimmed by structure, or null when it is not JSON, holds no
 * array long enough to trim, or would not shrink.
 *
 * @example
 * trimJsonArray(JSON.stringify([row0, row1, row2, { error: 'boom' }, row4, row5, row6, row7]), 2)
 * // → [row0, row1, "[compressed: 1 item dropped here; ask again for them]", {"error":"boom"},
 * //    "[compressed: 2 items dropped here; ask again for them]", row6, row7] (when that is shorter)
 */
export function trimJsonArray(text: string, keepItems: number): string | null {
  const start = text.trimStart()[0];
  if (start !== '[' && start !== '{') return null;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  let trimmed: unknown;
  if (Array.isArray(value)) {
    trimmed = trimArray(value, keepItems);
    if (trimmed === value) return null;
  } else if (typeof value === 'object' && value !== null) {
    let changed = false;
    const entries = Object.entries(value).map(([key, field]): [string, unknown] => {
      if (!Array.isArray(field)) return [key, field];
      const cut = trimArray(field, keepItems);
      if (cut !== field) changed = true;
      return [key, cut];
    });
    if (!changed) return null;
    trimmed = Object.fromEntries(entries);
  } else return null;
  const result = JSON.stringify(trimmed, null, indentOf(text));
  return result.length < text.length ? result : null;
}
