import { type Timings, type Usage, extractUsage } from './usage.js';

/**
 * A tap on a copy of an SSE answer: it reads the bytes after they were
 * passed on, never delays or changes them, and keeps only the current
 * unfinished line. It learns
 * - whether the stream ended properly (`data: [DONE]`) or with an error event,
 *   so a stream that just stops is not passed off as a clean end;
 * - where the bytes stand relative to an event boundary, so an error event
 *   appended after a failure is framed as its own event;
 * - the last `usage` and `timings` seen (only when asked: it parses JSON).
 */

const LINE_FEED = 0x0a;
const CARRIAGE_RETURN = 0x0d;
const DATA_PREFIX = Buffer.from('data:');
const DONE = '[DONE]';
// llama-server and OpenAI report failures inside a stream as `data: {"error": …}`.
const ERROR_EVENT = /^\{\s*"error"\s*:/;
const USAGE_OR_TIMINGS = /"(?:usage|timings)"\s*:\s*\{/;

export class SseTap {
  /** A `data: [DONE]` line went by. */
  sawDone = false;
  /** An error event went by: the stream already tells the client it failed. */
  sawError = false;
  usage: Usage | undefined;
  timings: Timings | undefined;

  readonly #collectUsage: boolean;
  /** Bytes of the line not yet ended by a line feed. */
  #partial: Buffer[] = [];
  /** Lines of the current event so far (0 right after a blank line). */
  #eventLines = 0;

  constructor(options: { collectUsage?: boolean } = {}) {
    this.#collectUsage = options.collectUsage ?? false;
  }

  write(chunk: Buffer): void {
    let start = 0;
    let newline = chunk.indexOf(LINE_FEED, start);
    while (newline !== -1) {
      let line = chunk.subarray(start, newline);
      if (this.#partial.length > 0) {
        this.#partial.push(line);
        line = Buffer.concat(this.#partial);
        this.#partial = [];
      }
      this.#line(line);
      start = newline + 1;
      newline = chunk.indexOf(LINE_FEED, start);
    }
    if (start < chunk.length) this.#partial.push(chunk.subarray(start));
  }

  /**
   * What to write before an appended event so it stands alone: nothing at a
   * boundary, a blank line to end a pending event, or a line end and a blank
   * line when the stream stopped inside a line (that event is then
   * malformed, which a client also reports as a failure).
   */
  closingBytes(): string {
    if (this.#partial.length > 0) return '\n\n';
    return this.#eventLines > 0 ? '\n' : '';
  }

  #line(raw: Buffer): void {
    const line = raw.length > 0 && raw[raw.length - 1] === CARRIAGE_RETURN ? raw.subarray(0, raw.length - 1) : raw;
    if (line.length === 0) {
      this.#eventLines = 0;
      return;
    }
    this.#eventLines++;
    if (line.length < DATA_PREFIX.length || !line.subarray(0, DATA_PREFIX.length).equals(DATA_PREFIX)) return;
    const dataStart = line[DATA_PREFIX.length] === 0x20 ? DATA_PREFIX.length + 1 : DATA_PREFIX.length;
    const data = line.subarray(dataStart);
    if (data.length === DONE.length && data.toString('latin1') === DONE) {
      this.sawDone = true;
      return;
    }
    // Only the first bytes are needed to recognise an error event.
    if (ERROR_EVENT.test(data.subarray(0, 32).toString('latin1'))) {
      this.sawError = true;
      return;
    }
    if (!this.#collectUsage) return;
    if (data.indexOf('"usage"') === -1 && data.indexOf('"timings"') === -1) return;
    const text = data.toString('utf8');
    if (!USAGE_OR_TIMINGS.test(text)) return;
    let event: unknown;
    try {
      event = JSON.parse(text);
    } catch {
      return;
    }
    const found = extractUsage(event);
    if (found.usage !== undefined) this.usage = found.usage;
    if (found.timings !== undefined) this.timings = found.timings;
  }
}

/** An SSE comment line: clients ignore it, so it can carry progress without changing the answer. */
export function sseComment(text: string): string {
  return `: ${text.replace(/[\r\n]+/g, ' ')}\n\n`;
}
