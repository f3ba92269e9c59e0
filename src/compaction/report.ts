/**
 * The one line each compaction is reported with, the same words in the log
 * and in the `x-compactor` response header. Header values must be ASCII, so
 * arrows are written `->`.
 */

/** 61234 → '61.2k', 950 → '950'. */
export function formatTokens(tokens: number): string {
  const rounded = Math.round(tokens);
  return rounded < 1000 ? String(rounded) : `${(rounded / 1000).toFixed(1)}k`;
}

function sizes(before: number, after: number): string {
  return `${formatTokens(before)} -> ${formatTokens(after)} tokens`;
}

function seconds(milliseconds: number): string {
  return `${(milliseconds / 1000).toFixed(1)}s`;
}

function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? '' : 's'}`;
}

export function summarizedLine(options: { old: number; kept: number; before: number; after: number; milliseconds: number }): string {
  return `summarized ${plural(options.old, 'message')} -> 1 summary + ${options.kept} kept (${sizes(options.before, options.after)}, ${seconds(options.milliseconds)})`;
}

export function prunedLine(options: { results: number; before: number; after: number }): string {
  return `pruned ${plural(options.results, 'tool result')} (${sizes(options.before, options.after)})`;
}

export function truncatedLine(options: { dropped: number; kept: number; before: number; after: number; reason: string }): string {
  return `truncated ${plural(options.dropped, 'message')} -> notice + ${options.kept} kept (${sizes(options.before, options.after)}; ${options.reason})`;
}

export function reusedLine(options: { before: number; after: number }): string {
  return `epoch reused (${sizes(options.before, options.after)})`;
}
