import type { RequestMode } from './request-mode.js';
import type { IncomingHttpHeaders } from 'node:http';
import type { ChatRequestBody, ReadRequest } from '../../formats/registry.js';
import type { PairProblem } from '../../transcript/pairs.js';
import type { AnswerWriter } from './answer.js';
import type { ChatContext } from './planner.js';

/**
 * The planner's view of one request (`ChatContext`). What it derives from
 * the exchange (`signal`, `headers`, `log`, `tenant`, `progress`) are
 * getters and methods on the prototype, read only when the planner asks:
 * no closure or accessor per request, and the `AbortSignal` is made only
 * when read (see ExchangeAbort).
 */
export class ExchangeContext implements ChatContext {
  readonly body: ChatRequestBody;
  readonly raw: Buffer;
  readonly changed: boolean;
  readonly sourceBytes: Buffer | undefined;
  readonly maxOutputTokens: ReadRequest['maxOutputTokens'];
  readonly pairRepairs: readonly PairProblem[];
  /** The mode of this request: the configuration's, or the one its `x-compactor-mode` header chose. */
  mode: RequestMode = 'compact';
  readonly #answer: AnswerWriter;
  readonly #streamRequested: boolean;

  constructor(answer: AnswerWriter, read: ReadRequest, raw: Buffer) {
    const { pairs } = read;
    this.#answer = answer;
    this.body = pairs.body;
    this.maxOutputTokens = read.maxOutputTokens;
    this.raw = raw;
    this.changed = pairs.changed;
    this.sourceBytes = read.messagesAsParsed === true && !pairs.changed ? raw : undefined;
    this.pairRepairs = pairs.repairs;
    this.#streamRequested = read.stream;
  }

  get tenant(): string {
    return this.#answer.record.tenant;
  }

  get slot(): number | null {
    return this.#answer.record.slot;
  }

  get headers(): IncomingHttpHeaders {
    return this.#answer.request.headers;
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
