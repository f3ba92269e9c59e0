import { TooManyItemsError, TooManyValuesError } from '../errors.js';
import { CLOSE_BRACE, CLOSE_BRACKET, COLON, COMMA, OPEN_BRACE, OPEN_BRACKET, QUOTE, closingQuote, keyIs } from './json-bytes.js';

/**
 * A large body's bytes scanned before anything parses them (issue 21 item 2),
 * a slice at a time so the event loop runs between slices: it counts the
 * planning items (the elements of the top-level conversation list, and of
 * each element's `content` and `tool_calls` lists, as planning-cap.ts counts
 * them after a parse) and refuses past `limits.max_items` before
 * `JSON.parse` ever sees the body; and it finds where each element of the
 * conversation list lies, so parse-ahead.ts parses them one by one.
 *
 * It reads bytes as splice.ts does (json-bytes.ts) and validates nothing beyond the
 * brackets: whatever it cannot follow, the whole-body parse refuses in its
 * own words later. It can also follow a body as it arrives
 * ({@link ArrivingScan}, fed by http/edge/body-receiver.ts): a string cut
 * by the end of what came so far is taken up again where it stopped.
 */

/** Deeper than this, the scan stops following (parse-ahead.ts leaves the body to the whole-body parse, which refuses it). */
const DEPTH_FOLLOWED = 1024;

/** What the scan found. */
export interface BodyScan {
  /** Whether the brackets matched and the body is one object: otherwise nothing else here holds. */
  readonly followed: boolean;
  /** The deepest nesting met (the root object is 1). */
  readonly depth: number;
  /** The value of the last top-level `listKey` when it is a list: from its `[` to just past its `]`. */
  readonly list: { readonly start: number; readonly end: number } | undefined;
  /** The positions of the list's top-level commas: its elements lie between `[`, these, and `]`. */
  readonly commas: readonly number[];
  /** The planning items counted (planning-cap.ts). */
  readonly items: number;
  /** Every JSON value met, containers and scalars, at any depth (the root object is one). */
  readonly values: number;
}

/** The bounds a scan refuses past: `limits.max_items` and `limits.max_values`. */
export interface ScanBounds {
  readonly maxItems: number;
  readonly maxValues: number;
}

const COUNTED_KEYS = [Buffer.from('"content"'), Buffer.from('"tool_calls"')];

/** The scan's state between slices. Depths: the root object's members are at depth 1, the list's elements at 2. */
class Scanner {
  position = 0;
  depth = 0;
  deepest = 0;
  followed = true;
  items = 0;
  values = 0;
  list: { start: number; end: number } | undefined;
  commas: number[] = [];
  readonly #open = new Uint8Array(DEPTH_FOLLOWED + 1);
  /** How many of `bytes` are there to read: all of them, unless the body is still arriving. */
  #available: number;
  /** `bytes` up to `available`: strings are searched in it (one view per arrival, not one per string). */
  #within: Buffer;
  /** A string whose closing quote has not arrived yet: where it opened, and whether it is a key. */
  #openString: { readonly start: number; readonly isKey: boolean } | undefined;
  /** The last key read at depth 1 was `listKey`; at depth 3 (in an element of the list), a counted one. */
  #keyIsList = false;
  #keyIsCounted = false;
  #expectKey = false;
  /** A value is due (after `[`, `:` or a list's `,`): the next byte that is not white space starts one. */
  #awaiting = false;
  /** Whether the list now open at depth 2 is the conversation, and the depth of a counted list open in one of its elements (0: none). */
  #inList = false;
  #countedDepth = 0;

  constructor(
    readonly bytes: Buffer,
    readonly quotedKey: Buffer,
    readonly bounds: ScanBounds,
  ) {
    this.#available = bytes.length;
    this.#within = bytes;
  }

  get available(): number {
    return this.#available;
  }

  set available(available: number) {
    this.#available = available;
    this.#within = available === this.bytes.length ? this.bytes : this.bytes.subarray(0, available);
  }

  get done(): boolean {
    return !this.followed || this.position >= this.bytes.length;
  }

  /** Scans up to `stop` (or past it, to the end of a string), never past `available`. */
  advance(stop: number): void {
    const { bytes } = this;
    const end = Math.min(stop, this.#available);
    if (this.#openString !== undefined && this.followed) this.string(this.#openString.start, this.#openString.isKey, this.position);
    while (this.followed && this.position < end) {
      const byte = bytes[this.position]!;
      if (byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09) {
        this.position++;
        continue;
      }
      if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) this.close(byte);
      else if (byte === COMMA) this.comma();
      else if (byte === COLON) {
        this.#awaiting = true;
        this.position++;
      }
      else if (byte === QUOTE && this.#expectKey) this.key();
      else this.value(byte);
    }
  }

  private key(): void {
    this.#expectKey = false;
    this.string(this.position, true, this.position + 1);
  }

  /** The string opened at `start`, its closing quote looked for from `from`: skipped, or left open until more bytes arrive. */
  private string(start: number, isKey: boolean, from: number): void {
    const quote = closingQuote(this.#within, from);
    if (quote === -1) {
      this.#openString = { start, isKey };
      this.position = this.#available;
      return;
    }
    this.#openString = undefined;
    this.position = quote + 1;
    if (isKey) this.keyRead(start);
  }

  private keyRead(start: number): void {
    if (this.depth === 1) this.#keyIsList = keyIs(this.bytes, start, this.position, this.quotedKey);
    else if (this.depth === 3 && this.#inList) this.#keyIsCounted = COUNTED_KEYS.some((quoted) => keyIs(this.bytes, start, this.position, quoted));
  }

  private value(byte: number): void {
    if (!this.#awaiting && this.depth > 0) {
      // A byte inside a number or a literal (or not JSON at all, which the parse refuses).
      this.position++;
      return;
    }
    this.#awaiting = false;
    // Every value counts (issue 34 item 2: 10 million empty objects beside the messages were never counted, and their parse held the loop 13 s).
    if (++this.values > this.bounds.maxValues) throw new TooManyValuesError(this.bounds.maxValues);
    if (this.depth === 0 && byte !== OPEN_BRACE) this.followed = false;
    // A later `listKey` that is not a list is the one JSON.parse keeps: there is no list to parse in pieces.
    if (this.depth === 1 && this.#keyIsList && byte !== OPEN_BRACKET) this.forgetList();
    if (this.#open[this.depth] === OPEN_BRACKET) this.element();
    if (byte === QUOTE) this.string(this.position, false, this.position + 1);
    else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) this.open(byte);
    else this.position++;
  }

  /** A value starts in a list: an item when the list is the conversation or a counted list of one of its elements. */
  private element(): void {
    if ((this.depth === 2 && this.#inList) || (this.#countedDepth !== 0 && this.depth === this.#countedDepth)) {
      if (++this.items > this.bounds.maxItems) throw new TooManyItemsError(this.bounds.maxItems);
    }
  }

  private open(byte: number): void {
    if (this.depth === DEPTH_FOLLOWED) {
      this.followed = false;
      return;
    }
    const opened = this.depth + 1;
    if (byte === OPEN_BRACKET && opened === 2 && this.#keyIsList) this.startList();
    if (byte === OPEN_BRACKET && opened === 4 && this.#inList && this.#keyIsCounted) this.#countedDepth = 4;
    this.depth = opened;
    this.deepest = Math.max(this.deepest, opened);
    this.#open[opened] = byte;
    this.#expectKey = byte === OPEN_BRACE;
    this.#awaiting = byte === OPEN_BRACKET;
    this.position++;
  }

  private startList(): void {
    // A later `listKey` replaces an earlier one, as JSON.parse keeps the last.
    this.items = 0;
    this.commas = [];
    this.list = { start: this.position, end: this.position };
    this.#inList = true;
  }

  private forgetList(): void {
    this.items = 0;
    this.commas = [];
    this.list = undefined;
  }

  private close(byte: number): void {
    const opened = this.#open[this.depth];
    if (this.depth === 0 || (byte === CLOSE_BRACE ? opened !== OPEN_BRACE : opened !== OPEN_BRACKET)) {
      this.followed = false;
      return;
    }
    if (this.depth === 2 && this.#inList) {
      this.list = { start: this.list!.start, end: this.position + 1 };
      this.#inList = false;
    }
    if (this.depth === this.#countedDepth) this.#countedDepth = 0;
    if (this.depth === 3) this.#keyIsCounted = false;
    this.depth--;
    this.#awaiting = false;
    this.#expectKey = false;
    this.position++;
  }

  private comma(): void {
    if (this.depth === 2 && this.#inList) this.commas.push(this.position);
    const inObject = this.#open[this.depth] === OPEN_BRACE;
    this.#expectKey = inObject;
    this.#awaiting = !inObject;
    this.position++;
  }
}

/** How many bytes are scanned between two turns of the event loop. */
export const SCAN_SLICE_BYTES = 1024 * 1024;

/**
 * Scans `bytes` a slice at a time, calling `pause` between slices (the
 * caller's turn of the event loop); throws a {@link TooManyItemsError} as
 * soon as the items counted pass `maxItems`, a {@link TooManyValuesError}
 * as soon as the values pass `maxValues`.
 */
export async function scanBody(bytes: Buffer, listKey: string, bounds: ScanBounds, pause: () => Promise<unknown>): Promise<BodyScan> {
  const scanner = new Scanner(bytes, Buffer.from(JSON.stringify(listKey)), bounds);
  for (;;) {
    scanner.advance(scanner.position + SCAN_SLICE_BYTES);
    if (scanner.done) break;
    await pause();
  }
  return resultOf(scanner);
}

function resultOf(scanner: Scanner): BodyScan {
  const followed = scanner.followed && scanner.depth === 0 && scanner.position >= scanner.bytes.length;
  return { followed, depth: scanner.deepest, list: scanner.list, commas: scanner.commas, items: scanner.items, values: scanner.values };
}

/**
 * The scan of a body while it arrives into `bytes` (a buffer of its
 * declared length, filled from the front): each call to {@link arrived}
 * scans what came since, up to a slice, so the scan is done by the time the
 * last byte is in, spread over the turns of the loop that brought the body
 * (issue 34: the scan after the read held the loop up to a MiB at a time,
 * after Fastify's copy of the whole body into one buffer).
 */
export class ArrivingScan {
  readonly #scanner: Scanner;

  constructor(
    readonly bytes: Buffer,
    readonly listKey: string,
    bounds: ScanBounds,
  ) {
    this.#scanner = new Scanner(bytes, Buffer.from(JSON.stringify(listKey)), bounds);
    this.#scanner.available = 0;
  }

  /** Whether bytes that arrived are still to be scanned (the scan stops early at what it cannot follow). */
  get behind(): boolean {
    const scanner = this.#scanner;
    return scanner.followed && scanner.position < scanner.available;
  }

  /**
   * The first `available` bytes are in: scans on from where it stopped, up
   * to a slice; call again while {@link behind}. Throws a TooManyItemsError
   * or TooManyValuesError as a whole-body scan would.
   */
  arrived(available: number): void {
    const scanner = this.#scanner;
    scanner.available = Math.min(available, this.bytes.length);
    scanner.advance(scanner.position + SCAN_SLICE_BYTES);
  }

  /** What the scan found, once every byte arrived and was scanned. */
  result(): BodyScan {
    if (this.behind || this.#scanner.available < this.bytes.length) throw new Error('the body has not all been scanned');
    return resultOf(this.#scanner);
  }
}
