import { connect } from 'node:net';

/**
 * A request written as raw bytes on a fresh TCP connection, for what no HTTP
 * client lets one send (a lying Content-Length, both Content-Length and
 * Transfer-Encoding, an oversized header block), and the raw answer read
 * until the server closes the connection or `timeoutMs` passes.
 */

export interface RawAnswer {
  /** Everything the server wrote. */
  readonly text: string;
  /** The status of the first response, or 0 when there was none. */
  readonly status: number;
  /** The body of the first response (after the blank line), as written. */
  readonly body: string;
  /** Whether the server closed the connection (rather than the timeout ending the read). */
  readonly closed: boolean;
}

export interface RawOptions {
  /** Written after the first chunk, separately (a body that arrives late, or never). */
  readonly more?: readonly (string | Buffer)[];
  /** Half-close the connection after writing. */
  readonly end?: boolean;
  readonly timeoutMs?: number;
  /** Read until the connection closes, not just the first complete response (with a Content-Length). */
  readonly untilClosed?: boolean;
}

function parse(text: string, closed: boolean): RawAnswer {
  const status = /^HTTP\/1\.1 (\d{3})/.exec(text);
  const headEnd = text.indexOf('\r\n\r\n');
  let body = headEnd === -1 ? '' : text.slice(headEnd + 4);
  const length = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, headEnd === -1 ? 0 : headEnd));
  if (length?.[1] !== undefined) body = body.slice(0, Number(length[1]));
  return { text, status: status?.[1] === undefined ? 0 : Number(status[1]), body, closed };
}

function firstResponseComplete(text: string): boolean {
  const headEnd = text.indexOf('\r\n\r\n');
  if (headEnd === -1) return false;
  const head = text.slice(0, headEnd);
  if (/\r\ntransfer-encoding: *chunked/i.test(head)) return text.endsWith('\r\n0\r\n\r\n');
  const length = /\r\ncontent-length: *(\d+)/i.exec(head);
  return length?.[1] !== undefined && Buffer.byteLength(text.slice(headEnd + 4), 'latin1') >= Number(length[1]);
}

export function rawRequest(url: string, head: string | Buffer, options: RawOptions = {}): Promise<RawAnswer> {
  const { more = [], end = true, timeoutMs = 3_000, untilClosed = false } = options;
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const socket = connect({ host: hostname, port: Number(port) });
    let done = false;
    const finish = (closed: boolean): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(parse(Buffer.concat(chunks).toString('latin1'), closed));
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      if (!untilClosed && firstResponseComplete(Buffer.concat(chunks).toString('latin1'))) finish(false);
    });
    socket.on('error', () => finish(true));
    socket.on('close', () => finish(true));
    socket.on('connect', () => {
      socket.write(head);
      for (const chunk of more) socket.write(chunk);
      if (end) socket.end();
    });
  });
}
