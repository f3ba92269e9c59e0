/**
 * What `x-compactor` says of the server's own time for one answer (issue 36):
 * `server 0.42 s prefill, 1.10 s decode`, from llama-server's `timings`
 * (`prompt_ms`, `predicted_ms`). A JSON answer carries it in the header (the
 * answer is read whole before the head goes out); a stream in the
 * `x-compactor` trailer and a last SSE comment, since its head went out
 * before the server had said anything.
 */

/** The server's account of one answer, as the request record keeps it (usage-hooks.ts `serverTimesOf`). */
export interface ServerTimes {
  readonly prefillMs: number;
  readonly decodeMs: number;
}

/**
 * @example
 * serverSecondsText({ prefillMs: 420, decodeMs: 1100 }) // → 'server 0.42 s prefill, 1.10 s decode'
 */
export function serverSecondsText(times: ServerTimes): string {
  return `server ${(times.prefillMs / 1000).toFixed(2)} s prefill, ${(times.decodeMs / 1000).toFixed(2)} s decode`;
}

/**
 * The whole `x-compactor` line: compactor's report, then the server's
 * seconds; undefined when there is neither.
 *
 * @example
 * compactorLine('summarized 84 messages -> 1', { prefillMs: 420, decodeMs: 1100 }) // → 'summarized 84 messages -> 1; server 0.42 s prefill, 1.10 s decode'
 */
export function compactorLine(report: string | undefined, times: ServerTimes | null): string | undefined {
  if (times === null) return report;
  const server = serverSecondsText(times);
  return report === undefined ? server : `${report}; ${server}`;
}
