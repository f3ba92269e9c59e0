/**
 * The one SSE parser of the tests, after the WHATWG grammar
 * (html.spec.whatwg.org, "Interpreting an event stream"): a leading BOM is
 * ignored; lines end with CRLF, LF or CR; a line starting with `:` is a
 * comment; `field: value` loses one space after the colon; `data` fields join
 * with a newline; a blank line ends an event, which a client dispatches only
 * when it has data. What a client would decode, to compare what comes through
 * compactor with what the upstream sent, and what a double writes to replay a
 * recorded stream event by event.
 */

/** One event of an SSE body: its lines up to the blank line that ends it. */
export interface SseEvent {
  /**
   * The event as sent, line ends and closing blank line included, plus any
   * stray blank lines before it (the last event also takes those after it):
   * the `raw`s joined give back the body, all of it with `dispatchAtEnd`.
   */
  readonly raw: string;
  /** Its lines, line ends removed. */
  readonly lines: readonly string[];
  /** What follows the `:` of each comment line, as written. */
  readonly comments: readonly string[];
  /** The value of each `data` field, in order. */
  readonly dataFields: readonly string[];
  /** The data fields joined with a newline, what a client dispatches; undefined when there are none (nothing is dispatched). */
  readonly data: string | undefined;
  /** Whether the data is `[DONE]`, OpenAI's end of a stream. */
  readonly done: boolean;
}

export interface SseOptions {
  /**
   * The spec discards an event the stream did not end with a blank line;
   * many clients dispatch it. True: keep it (and a last line with no line end).
   */
  readonly dispatchAtEnd?: boolean;
}

const LINE_END = /\r\n|\r|\n/g;
const BOM = '\uFEFF';

/** Every event of `body` (comment-only ones too), in order. */
export function parseSse(body: Buffer | string, options: SseOptions = {}): SseEvent[] {
  const text = typeof body === 'string' ? body : body.toString('utf8');
  const events: SseEvent[] = [];
  let lines: string[] = [];
  /** Where the raw text of the next event starts. */
  let rawStart = 0;
  const close = (end: number): void => {
    if (lines.length === 0) return;
    events.push(eventOf(text.slice(rawStart, end), lines));
    rawStart = end;
    lines = [];
  };
  let lineStart = text.startsWith(BOM) ? BOM.length : 0;
  for (const match of text.matchAll(LINE_END)) {
    const line = text.slice(lineStart, match.index);
    lineStart = match.index + match[0].length;
    if (line === '') close(lineStart);
    else lines.push(line);
  }
  let end = lineStart;
  if (options.dispatchAtEnd === true) {
    if (lineStart < text.length) lines.push(text.slice(lineStart));
    end = text.length;
    close(end);
  }
  // Blank lines after the last event belong to it, so no byte goes missing.
  const last = events.at(-1);
  if (lines.length === 0 && last !== undefined && rawStart < end) events[events.length - 1] = { ...last, raw: last.raw + text.slice(rawStart, end) };
  return events;
}

/** The data of each event a client dispatches (those with data), in order. */
export function sseData(body: Buffer | string, options: SseOptions = {}): string[] {
  return parseSse(body, options).flatMap((event) => (event.data === undefined ? [] : [event.data]));
}

function eventOf(raw: string, lines: readonly string[]): SseEvent {
  const comments: string[] = [];
  const dataFields: string[] = [];
  for (const line of lines) {
    if (line.startsWith(':')) {
      comments.push(line.slice(1));
      continue;
    }
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') dataFields.push(value);
  }
  const data = dataFields.length === 0 ? undefined : dataFields.join('\n');
  return { raw, lines, comments, dataFields, data, done: data === '[DONE]' };
}

/**
 * What compactor appends to a whole stream that ended at an event boundary
 * (issue 36): the server's seconds as a last comment. These are the seconds
 * of the recorded stream's timings (test/fixtures/llama-server/chat_stream.txt:
 * prompt_ms 1.215, predicted_ms 8.211) and of `chatStreamEvents`' defaults
 * (1.2, 8.2), both `server 0.00 s prefill, 0.01 s decode`.
 */
export const SERVER_COMMENT = ': server 0.00 s prefill, 0.01 s decode\n\n';

/** What the x-compactor trailer of such a stream says when compactor changed nothing; also the header of the recorded JSON answer (chat_nonstream.txt: prompt_ms 2.198, predicted_ms 9.03). */
export const SERVER_LINE = 'server 0.00 s prefill, 0.01 s decode';
