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

/** The compression tier's line: `compressed 12 tool results (9.1k -> 2.0k tokens)`. */
export function compressedLine(options: { results: number; before: number; after: number }): string {
  return `compressed ${plural(options.results, 'tool result')} (${sizes(options.before, options.after)})`;
}

/** The clearing a client asked for (Anthropic's `clear_tool_uses`, tiers/clear-tool-uses.ts): `compressed 7 tool results (clear_tool_uses: 7 cleared, 2 inputs; 9.1k -> 2.0k tokens)`. */
export function clearedLine(options: { results: number; inputs: number; before: number; after: number }): string {
  const inputs = options.inputs === 0 ? '' : `, ${plural(options.inputs, 'input')}`;
  return `compressed ${plural(options.results, 'tool result')} (clear_tool_uses: ${options.results} cleared${inputs}; ${sizes(options.before, options.after)})`;
}

/** What a summary's kept results were compressed from and to (plan.ts's `PrunedKept.compressed`). */
interface KeptCompressed {
  readonly results: number;
  readonly before: number;
  readonly after: number;
}

/**
 * A summary's (or truncation's) line led by the compression of the results it
 * keeps, when it compressed some: `compressed 3 tool results (2.1k -> 90
 * tokens), summarized …`. Here the sizes are those of the compressed results;
 * the request's own are the summary's.
 */
export function withCompressed(line: string, compressed: KeptCompressed | undefined): string {
  return compressed === undefined ? line : `${compressedLine(compressed)}, ${line}`;
}

export function truncatedLine(options: { dropped: number; kept: number; before: number; after: number; reason: string }): string {
  return `truncated ${plural(options.dropped, 'message')} -> notice + ${options.kept} kept (${sizes(options.before, options.after)}; ${options.reason})`;
}

export function reusedLine(options: { before: number; after: number }): string {
  return `epoch reused (${sizes(options.before, options.after)})`;
}

const PRESENT_OF: Readonly<Record<string, string>> = { summarized: 'summarize', pruned: 'prune', compressed: 'compress', truncated: 'truncate', repaired: 'repair' };

/**
 * A report line said of what observe mode would have done: `pruned 3 tool
 * results (…)` → `would prune 3 tool results (…)`.
 */
export function wouldLine(line: string): string {
  return `would ${line.replace(/^(summarized|pruned|compressed|truncated|repaired)\b/, (verb) => PRESENT_OF[verb] ?? verb)}`;
}

/** What a summary would replace (observe mode never calls one, so it says nothing of what it would say). */
export function wouldSummarizeLine(options: { tier: 'summary' | 'steps'; old: number; kept: number; before: number; after: number; compressed?: KeptCompressed | undefined }): string {
  const what = options.tier === 'steps' ? plural(options.old, 'step message') : plural(options.old, 'message');
  const compressed = options.compressed === undefined ? '' : `${wouldLine(compressedLine(options.compressed)).slice('would '.length)}, `;
  return `would ${compressed}summarize ${what} -> 1 summary + ${options.kept} kept (${sizes(options.before, options.after)})`;
}

/** Observe mode's line for a history that could not fit even compacted. */
export function wouldRefuseLine(options: { needed: number; window: number | null }): string {
  return `would refuse: context_length_exceeded (${formatTokens(options.needed)} tokens needed, window ${options.window === null ? 'unknown' : formatTokens(options.window)})`;
}

/** Observe mode's line for a history in the soft zone: the next epoch would be prepared after the answer. */
export function wouldPrepareLine(options: { size: number }): string {
  return `would prepare the next epoch in the background (${formatTokens(options.size)} tokens, over the soft threshold)`;
}
