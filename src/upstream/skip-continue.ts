import type { Socket } from 'node:net';

/**
 * Drops `100 Continue` answers an upstream sends unasked, on the connection
 * itself, before undici reads them.
 *
 * Why: a client must skip any 1xx answer before the final one, asked for or
 * not (RFC 9110 §15.2). Node's http client does; undici skips 102 and 103
 * but destroys the connection on a 100 ("bad response") since it never sends
 * `Expect: 100-continue` itself, and compactor answered 502 for a good
 * answer. Some servers, and proxies in front of them, send a 100 before
 * every answer anyway.
 *
 * How: an answer can only start right after compactor wrote a request (undici
 * sends the next request on a connection once the previous answer is done),
 * and undici writes each request head as one string starting with the request
 * line. So from that write on, the bytes read are checked for a 100 head,
 * which is dropped whole (a 1xx has no body), however the reads cut it; the
 * first bytes that are not one are the real answer, and everything after
 * them passes untouched until the next request.
 */

// `HTTP/1.1 100 ` — the version's minor digit and the byte after the code vary (`HTTP/1.0`, `100\r\n`).
const CONTINUE_STATUS_LINE = Buffer.from('HTTP/1.1 100 ');
const MINOR_VERSION_AT = 7;
const AFTER_CODE_AT = 12;
const HEAD_END = Buffer.from('\r\n\r\n');
// Beyond this a head is not something to drop: it is passed on, and undici's own limit
// (16 KiB by default) rejects it, as it would without this filter.
const MAX_CONTINUE_HEAD_BYTES = 16 * 1024;
/** The line undici starts every request head with: `METHOD target HTTP/1.1`. */
const REQUEST_LINE = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+ \S+ HTTP\/1\.1\r\n/;

type Decision = { readonly kind: 'continue'; readonly end: number } | { readonly kind: 'answer' } | { readonly kind: 'wait' };

/** Whether `bytes`, read where an answer starts, begin with a whole 100 head, something else, or too little to tell. */
export function continueHead(bytes: Buffer): Decision {
  const known = Math.min(bytes.length, CONTINUE_STATUS_LINE.length);
  for (let index = 0; index < known; index++) {
    const byte = bytes[index];
    const fits =
      index === MINOR_VERSION_AT ? byte === 0x30 || byte === 0x31 : index === AFTER_CODE_AT ? byte === 0x20 || byte === 0x0d : byte === CONTINUE_STATUS_LINE[index];
    if (!fits) return { kind: 'answer' };
  }
  if (known < CONTINUE_STATUS_LINE.length) return { kind: 'wait' };
  const headEnd = bytes.indexOf(HEAD_END);
  if (headEnd !== -1) return { kind: 'continue', end: headEnd + HEAD_END.length };
  return bytes.length > MAX_CONTINUE_HEAD_BYTES ? { kind: 'answer' } : { kind: 'wait' };
}

const EMPTY: Buffer = Buffer.alloc(0);

/** Makes `socket` (a connection undici is about to use) drop unasked `100 Continue` answers. */
export function skipContinueResponses(socket: Socket): void {
  let atAnswerStart = false;
  /** Bytes read at the start of an answer, not yet known to be a 100 head or not. */
  let held: Buffer = EMPTY;

  const write = socket.write;
  socket.write = function (this: Socket, ...args: Parameters<Socket['write']>): boolean {
    const [chunk] = args;
    if (typeof chunk === 'string' && REQUEST_LINE.test(chunk)) atAnswerStart = true;
    return write.apply(this, args);
  } as Socket['write'];

  // Every byte read from the connection enters the stream through push (stream_base_commons' onStreamRead).
  const push = socket.push;
  socket.push = function (this: Socket, chunk: unknown, encoding?: BufferEncoding): boolean {
    if (chunk === null) {
      // The connection ended inside what looked like a 100 head: undici sees the bytes and reports the bad answer.
      if (held.length > 0) push.call(this, held);
      held = EMPTY;
      return push.call(this, null);
    }
    if (!atAnswerStart || !Buffer.isBuffer(chunk)) return push.call(this, chunk, encoding);
    held = held.length === 0 ? chunk : Buffer.concat([held, chunk]);
    for (;;) {
      const decision = continueHead(held);
      if (decision.kind === 'wait') return true;
      if (decision.kind === 'answer') {
        atAnswerStart = false;
        const answer = held;
        held = EMPTY;
        return push.call(this, answer);
      }
      held = held.subarray(decision.end);
      if (held.length === 0) return true;
    }
  };
}
