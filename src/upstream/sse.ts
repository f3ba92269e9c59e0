import { type Timings, type Usage, type UsageWords, extractUsage } from './usage.js';

/**
 * A tap on a copy of an SSE answer: it reads the bytes after they were
 * passed on, never delays or changes them, and keeps only the current
 * unfinished line. It learns
 * - whether the stream ended properly (`data: [DONE]`) or with an error event,
 *   so a stream that just stops is not passed off as a clean end;
 * - where the bytes stand relative to an event boundary, so an error event
 *   appended after a failure is framed as its own event;
 * - the last `usage` and `timings` seen (only when asked: it parses JSON).
 * A line longer than {@link MAX_TAPPED_LINE_BYTES} is not read (only where it
 * ends is), so what the tap holds stays bounded whatever the upstream sends.
 */

/**
 * The longest unfinished line the tap holds. What it looks for is small
 * (`data: [DONE]`, an error event, a usage chunk of ~1 KB with llama-server's
 * timings); a longer line is a content delta, or an upstream that never ends
 * its line (a 1.4 GB line once took 1.5 GB of memory). 1 MiB is a thousand
 * times a usage line and a trifle next to the relay's own buffers.
 */
export const MAX_TAPPED_LINE_BYTES = 1024 * 1024;

const LINE_FEED = 0x0a;
const CARRIAGE_RETURN = 0x0d;
const DATA_PREFIX = Buffer.from('data:');
const DONE = '[DONE]';
const EVENT_PREFIX = Buffer.from('event:');
/**
 * How a stream of one API ends (each wire format says its own,
 * src/formats/<name>/stream.ts): properly besides `data: [DONE]`, by the
 * names of its final events, read off their `event:` line (the data of
 * `response.completed` holds the whole response and may name its type
 * last), or by a data line that ends it when no `event:` line came; or with
 * an error event, whose data `error` recognises from its first 32 bytes.
 */
export interface StreamEnd {
  readonly events: ReadonlySet<string>;
  readonly data?: RegExp;
  readonly error: RegExp;
}

/** What the tap reads a stream by: its wire format's stream end and usage words (src/formats/<name>/). */
export interface TappedFormat {
  readonly streamEnd: StreamEnd;
  readonly usage: UsageWords;
}

// An error event that names no status is a failure of the server behind compactor: a bad gateway.
const UNKNOWN_ERROR_STATUS = 502;

export class SseTap {
  usage: Usage | undefined;
  timings: Timings | undefined;

  readonly #collectUsage: boolean;
  readonly #end: StreamEnd;
  readonly #usageWords: UsageWords;
  /** The usage key quoted, and a pattern of it or `timings` opening an object: a data line is parsed only when one is there. */
  readonly #usageKey: string;
  readonly #usageOrTimings: RegExp;
  #sawDone = false;
  #sawError = false;
  /** The data of the first error event, kept to read its status (error events are small and rare). */
  #errorData: Buffer | undefined;
  /** Bytes of the line not yet ended by a line end (none once the line proved too long). */
  #partial: Buffer[] = [];
  #partialBytes = 0;
  /** The current line grew past MAX_TAPPED_LINE_BYTES: its bytes are dropped until it ends. */
  #skippingLine = false;
  /** Lines of the current event so far (0 right after a blank line). */
  #eventLines = 0;
  /** The last byte seen was a CR ending a line: an LF right after it belongs to the same line end (CRLF). */
  #afterCarriageReturn = false;

  constructor(format: TappedFormat, options: { collectUsage?: boolean } = {}) {
    this.#collectUsage = options.collectUsage ?? false;
    this.#end = format.streamEnd;
    this.#usageWords = format.usage;
    this.#usageKey = `"${format.usage.key}"`;
    this.#usageOrTimings = usageOrTimings(format.usage.key);
  }

  /** The last `usage` and `timings` seen (with `collectUsage`). */
  usageFound(): { readonly usage: Usage | undefined; readonly timings: Timings | undefined } {
    return this;
  }

  /**
   * A `data: [DONE]` line went by. A stream may end with that line unended
   * (no line end, no blank line after it): it still said it was done, so that
   * counts too.
   */
  get sawDone(): boolean {
    return this.#sawDone || this.#lastLineIs((data) => isDone(data));
  }

  /** An error event went by: the stream already tells the client it failed. */
  get sawError(): boolean {
    return this.#sawError || this.#lastLineIs((data) => this.#isErrorEvent(data));
  }

  /**
   * The HTTP status the stream's error event stands for: its `error.code`
   * when that is an error status (llama-server writes `"code":500`), else 502;
   * null when no error event went by.
   */
  get errorStatus(): number | null {
    if (!this.sawError) return null;
    const data = this.#errorData ?? dataOf(Buffer.concat(this.#partial));
    let code: unknown;
    try {
      code = (JSON.parse(data?.toString('utf8') ?? '') as { error?: { code?: unknown } }).error?.code;
    } catch {
      code = undefined;
    }
    return typeof code === 'number' && Number.isInteger(code) && code >= 400 && code <= 599 ? code : UNKNOWN_ERROR_STATUS;
  }

  /** Bytes of the unfinished line held: never more than {@link MAX_TAPPED_LINE_BYTES}. */
  get bufferedBytes(): number {
    return this.#partialBytes;
  }

  /** Takes the next bytes; lines end with CRLF, LF or CR (the SSE grammar), split anywhere across chunks. */
  write(chunk: Buffer): void {
    let start = 0;
    if (this.#afterCarriageReturn && chunk.length > 0) {
      this.#afterCarriageReturn = false;
      if (chunk[0] === LINE_FEED) start = 1;
    }
    let lineFeed = chunk.indexOf(LINE_FEED, start);
    let carriageReturn = chunk.indexOf(CARRIAGE_RETURN, start);
    while (lineFeed !== -1 || carriageReturn !== -1) {
      const end = carriageReturn === -1 || (lineFeed !== -1 && lineFeed < carriageReturn) ? lineFeed : carriageReturn;
      this.#endLine(chunk.subarray(start, end));
      start = end + 1;
      if (end === carriageReturn) {
        if (start === chunk.length) this.#afterCarriageReturn = true;
        else if (chunk[start] === LINE_FEED) start++;
      }
      if (lineFeed !== -1 && lineFeed < start) lineFeed = chunk.indexOf(LINE_FEED, start);
      if (carriageReturn !== -1 && carriageReturn < start) carriageReturn = chunk.indexOf(CARRIAGE_RETURN, start);
    }
    if (start < chunk.length) this.#hold(chunk.subarray(start));
  }

  /** Keeps the start of an unfinished line, unless the line is too long to read. */
  #hold(bytes: Buffer): void {
    if (this.#skippingLine) return;
    if (this.#partialBytes + bytes.length > MAX_TAPPED_LINE_BYTES) {
      this.#partial = [];
      this.#partialBytes = 0;
      this.#skippingLine = true;
      return;
    }
    this.#partial.push(bytes);
    this.#partialBytes += bytes.length;
  }

  /** A line end came: `tail` is the last part of the line. */
  #endLine(tail: Buffer): void {
    const tooLong = this.#skippingLine || this.#partialBytes + tail.length > MAX_TAPPED_LINE_BYTES;
    const line = tooLong || this.#partial.length === 0 ? tail : Buffer.concat([...this.#partial, tail]);
    this.#partial = [];
    this.#partialBytes = 0;
    this.#skippingLine = false;
    // A line that long is a content delta: it only counts as a line of its event.
    if (tooLong) this.#eventLines++;
    else this.#line(line);
  }

  /**
   * What to write before an appended event so it stands alone: nothing at a
   * boundary, a blank line to end a pending event, or a line end and a blank
   * line when the stream stopped inside a line (that event is then
   * malformed, which a client also reports as a failure). After a CR, one
   * more LF goes first: a client takes an LF right after a CR as part of
   * the same line end.
   */
  closingBytes(): string {
    const absorbed = this.#afterCarriageReturn ? '\n' : '';
    if (this.#partial.length > 0 || this.#skippingLine) return '\n\n';
    return absorbed + (this.#eventLines > 0 ? '\n' : '');
  }

  /** Whether the unended last line is a data line whose data passes `test`. */
  #lastLineIs(test: (data: Buffer) => boolean): boolean {
    if (this.#partial.length === 0) return false;
    const data = dataOf(Buffer.concat(this.#partial));
    return data !== null && test(data);
  }

  // Only the first bytes are needed to recognise an error event.
  #isErrorEvent(data: Buffer): boolean {
    return this.#end.error.test(data.subarray(0, 32).toString('latin1'));
  }

  #line(line: Buffer): void {
    if (line.length === 0) {
      this.#eventLines = 0;
      return;
    }
    this.#eventLines++;
    const data = dataOf(line);
    if (data === null) {
      if (isFinalEventLine(line, this.#end.events)) this.#sawDone = true;
      return;
    }
    if (isDone(data) || this.#end.data?.test(data.subarray(0, 40).toString('latin1')) === true) {
      this.#sawDone = true;
      return;
    }
    if (this.#isErrorEvent(data)) {
      this.#sawError = true;
      this.#errorData ??= Buffer.from(data);
      return;
    }
    if (!this.#collectUsage) return;
    if (data.indexOf(this.#usageKey) === -1 && data.indexOf('"timings"') === -1) return;
    const text = data.toString('utf8');
    if (!this.#usageOrTimings.test(text)) return;
    let event: unknown;
    try {
      event = JSON.parse(text);
    } catch {
      return;
    }
    const found = extractUsage(event, this.#usageWords);
    if (found.usage !== undefined) this.usage = found.usage;
    if (found.timings !== undefined) this.timings = found.timings;
  }
}

/** The value of a `data:` line (one leading space dropped), or null for any other line. */
function dataOf(line: Buffer): Buffer | null {
  if (line.length < DATA_PREFIX.length || !line.subarray(0, DATA_PREFIX.length).equals(DATA_PREFIX)) return null;
  return line.subarray(line[DATA_PREFIX.length] === 0x20 ? DATA_PREFIX.length + 1 : DATA_PREFIX.length);
}

function isFinalEventLine(line: Buffer, events: ReadonlySet<string>): boolean {
  if (events.size === 0 || line.length < EVENT_PREFIX.length || line.length > 64 || !line.subarray(0, EVENT_PREFIX.length).equals(EVENT_PREFIX)) return false;
  return events.has(line.subarray(EVENT_PREFIX.length).toString('latin1').trim());
}

function isDone(data: Buffer): boolean {
  return data.length === DONE.length && data.toString('latin1') === DONE;
}

/** A key followed by an object, for llama-server's `timings` and the format's usage key; made once per key (a format's), not per stream. */
const usageKeyPatterns = new Map<string, RegExp>();
function usageOrTimings(key: string): RegExp {
  let pattern = usageKeyPatterns.get(key);
  if (pattern === undefined) {
    pattern = new RegExp(`"(?:${key.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}|timings)"\\s*:\\s*\\{`);
    usageKeyPatterns.set(key, pattern);
  }
  return pattern;
}
