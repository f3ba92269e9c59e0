/**
 * The small JSON surface of the upstream the compaction engine reads: the
 * served window, exact token counts, and the summary calls. The proxy's
 * upstream client implements it; tests can hand in a double.
 */
export interface JsonReply {
  readonly status: number;
  /** The parsed body, or undefined when it was not JSON. */
  readonly body: unknown;
}

/** Request headers for a call made on a client's behalf: its `authorization`, when no upstream key is configured. */
export type CallHeaders = Readonly<Record<string, string>>;

export interface UpstreamJson {
  getJson(path: string, signal?: AbortSignal, headers?: CallHeaders): Promise<JsonReply>;
  postJson(path: string, body: unknown, signal?: AbortSignal, headers?: CallHeaders): Promise<JsonReply>;
}

/** Reads a number at a path of plain objects, or undefined. */
export function numberAt(value: unknown, ...path: string[]): number | undefined {
  let current = value;
  for (const key of path) {
    if (typeof current !== 'object' || current === null) return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return typeof current === 'number' && Number.isFinite(current) ? current : undefined;
}
