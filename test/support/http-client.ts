import { type IncomingHttpHeaders, type IncomingMessage, request } from 'node:http';

/** A plain HTTP exchange as a client sees it, with how the body ended. */
export interface RawExchange {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
  /** The trailer fields after a chunked body (empty when none came). */
  readonly trailers?: NodeJS.Dict<string>;
  /** `ended`: a complete body; `broken`: the connection died mid-body. */
  readonly ending: 'ended' | 'broken';
}

export interface SendOptions {
  readonly method?: string;
  readonly headers?: Record<string, string>;
  readonly body?: string | Buffer;
  /** Called with the response as soon as its head arrives (before the body is read). */
  readonly onResponse?: (response: IncomingMessage) => void;
}

/** Sends one request with node:http (no client-side retries, no decoding) and reads the whole answer. */
export function send(url: string, options: SendOptions = {}): Promise<RawExchange> {
  const { method = 'GET', headers = {}, body } = options;
  return new Promise((resolve, reject) => {
    const outgoing = request(url, { method, headers, agent: false }, (response) => {
      options.onResponse?.(response);
      const chunks: Buffer[] = [];
      let ending: 'ended' | 'broken' | undefined;
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.once('end', () => (ending = 'ended'));
      response.once('error', () => (ending = 'broken'));
      response.once('close', () => {
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks), trailers: response.trailers, ending: ending === 'ended' && response.complete ? 'ended' : 'broken' });
      });
    });
    outgoing.once('error', reject);
    outgoing.end(body);
  });
}

export function postJson(url: string, body: unknown, options: Omit<SendOptions, 'body' | 'method'> = {}): Promise<RawExchange> {
  return send(url, { ...options, method: 'POST', headers: { 'content-type': 'application/json', ...options.headers }, body: JSON.stringify(body) });
}
