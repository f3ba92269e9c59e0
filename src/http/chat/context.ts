import type { IncomingHttpHeaders } from 'node:http';
import type { PairProblem } from '../../transcript/pairs.js';
import type { ChatExchange } from './exchange.js';
import type { ChatRequestBody, ReadRequest } from '../../formats/registry.js';
import type { ChatContext } from './planner.js';
import { sendProgress } from './progress.js';

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
  readonly maxOutputTokens: ReadRequest['maxOutputTokens'];
  readonly pairRepairs: readonly PairProblem[];
  readonly #exchange: ChatExchange;
  readonly #streamRequested: boolean;

  constructor(exchange: ChatExchange, read: ReadRequest, raw: Buffer) {
    const { pairs } = read;
    this.#exchange = exchange;
    this.body = pairs.body;
    this.maxOutputTokens = read.maxOutputTokens;
    this.raw = raw;
    this.changed = pairs.changed;
    this.pairRepairs = pairs.repairs;
    this.#streamRequested = read.stream;
  }

  get tenant(): string {
    return this.#exchange.record.tenant;
  }

  get headers(): IncomingHttpHeaders {
    return this.#exchange.request.headers;
  }

  get log(): ChatContext['log'] {
    return this.#exchange.request.log;
  }

  get signal(): AbortSignal {
    return this.#exchange.abort.signal;
  }

  progress(comment: string): boolean {
    return sendProgress(this.#exchange, this.#streamRequested, comment);
  }
}
