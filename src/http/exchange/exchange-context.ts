import type { RequestMode } from './request-mode.js';
import type { IncomingHttpHeaders } from 'node:http';
import type { ChatRequestBody, ReadRequest, WireFormat } from '../../formats/registry.js';
import type { ContextEdits } from '../../transcript/context-edits.js';
import type { PairProblem } from '../../transcript/pairs.js';
import type { AnswerWriter } from './answer.js';
import type { ChatContext } from './planner.js';

/**
 * The planner's view of one request (`ChatContext`). What it derives from
 * the exchange (`signal`, `headers`, `log`, `keyTenant`, `progress`) are
 * getters and methods on the prototype, read only when the planner asks:
 * no closure or accessor per request, and the `AbortSignal` is made only
 * when read (see ExchangeAbort). The client's bytes (`raw`) are the
 * request's: once the request was forwarded they are let go of
 * (`AnswerWriter.forgetClientBytes`), so a stream that idles for minutes does
 * not hold a body the upstream already has.
 */
export class ExchangeContext implements ChatContext {
  readonly body: ChatRequestBody;
  readonly changed: boolean;
  readonly maxOutputTokens: ReadRequest['maxOutputTokens'];
  readonly pairRepairs: readonly PairProblem[];
  readonly edits: ContextEdits | undefined;
  /** The mode of this request: the configuration's, or the one its `x-compactor-mode` header chose. */
  mode: RequestMode = 'compact';
  readonly #answer: AnswerWriter;
  readonly #streamRequested: boolean;
  readonly #messagesAsParsed: boolean;

  constructor(answer: AnswerWriter, read: ReadRequest) {
    const { pairs } = read;
    this.#answer = answer;
    this.body = pairs.body;
    this.maxOutputTokens = read.maxOutputTokens;
    this.changed = pairs.changed;
    this.#messagesAsParsed = read.messagesAsParsed === true && !pairs.changed;
    this.pairRepairs = pairs.repairs;
    this.edits = read.edits;
    this.#streamRequested = read.stream;
  }

  get streamed(): boolean {
    return this.#streamRequested;
  }

  get raw(): Buffer {
    return this.#answer.clientBytes;
  }

  /** `raw` while `body.messages` is exactly what it parses to (no pair repaired); a getter, so nothing holds the bytes past the forward. */
  get sourceBytes(): Buffer | undefined {
    return this.#messagesAsParsed ? this.raw : undefined;
  }

  get keyTenant(): string {
    return this.#answer.record.keyTenant;
  }

  get slot(): number | null {
    return this.#answer.record.slot;
  }

  get headers(): IncomingHttpHeaders {
    return this.#answer.request.headers;
  }

  get format(): WireFormat {
    return this.#answer.route.format;
  }

  get log(): ChatContext['log'] {
    return this.#answer.request.log;
  }

  get signal(): AbortSignal {
    return this.#answer.abort.signal;
  }

  progress(comment: string): boolean {
    return this.#answer.progress(this.#streamRequested, comment);
  }
}
