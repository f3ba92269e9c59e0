import type { IncomingHttpHeaders } from 'node:http';
import type { PairProblem } from '../../transcript/pairs.js';
import type { ChatExchange } from './exchange.js';
import type { ChatContext, ChatRequestBody } from './planner.js';
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
  readonly pairRepairs: readonly PairProblem[];
  readonly #exchange: ChatExchange;
  readonly #streamRequested: boolean;

  constructor(exchange: ChatExchange, body: ChatRequestBody, raw: Buffer, changed: boolean, pairRepairs: readonly PairProblem[], streamRequested: boolean) {
    this.#exchange = exchange;
    this.body = body;
    this.raw = raw;
    this.changed = changed;
    this.pairRepairs = pairRepairs;
    this.#streamRequested = streamRequested;
  }

  get tenant(): string {
    return this.#exchange.record.tenant;
  }

  get slot(): number | null {
    return this.#exchange.record.slot;
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
