import { connect, type Socket } from 'node:net';

/**
 * Clients at distinct loopback addresses (127.0.0.2, 127.0.0.3, …: on Linux
 * the whole of 127.0.0.0/8 is the loopback interface), for what tells one
 * client from another by its address: `limits.max_connections` counts
 * connections per client address (issue 34 item 1).
 */

export interface HeldConnection {
  readonly socket: Socket;
  /** Whether the server closed (or reset) it. */
  closed(): boolean;
  /** Resolves when it closes. */
  readonly closing: Promise<void>;
  /** Everything the server wrote on it so far (latin1). */
  text(): string;
  /** Resolves once what the server wrote satisfies `done`, or the connection closes. */
  until(done: (text: string) => boolean): Promise<string>;
}

/** A TCP connection to `url` from `localAddress`, opened and then left as the caller writes to it. */
export async function connectFrom(url: string, localAddress: string): Promise<HeldConnection> {
  const { hostname, port } = new URL(url);
  const socket = await new Promise<Socket>((resolve, reject) => {
    const made = connect({ host: hostname, port: Number(port), localAddress }, () => resolve(made));
    made.once('error', reject);
  });
  let text = '';
  let closed = false;
  const waiting: Array<() => void> = [];
  const wake = (): void => {
    for (const waiter of waiting.splice(0)) waiter();
  };
  socket.on('error', () => undefined);
  socket.on('data', (chunk: Buffer) => {
    text += chunk.toString('latin1');
    wake();
  });
  const closing = new Promise<void>((resolve) =>
    socket.once('close', () => {
      closed = true;
      wake();
      resolve();
    }),
  );
  const until = async (done: (text: string) => boolean): Promise<string> => {
    while (!done(text) && !closed) await new Promise<void>((resolve) => waiting.push(resolve));
    return text;
  };
  return { socket, closed: () => closed, closing, text: () => text, until };
}

/** Whether `text` holds a whole HTTP/1.1 response (a Content-Length body or a chunked one), after `from`. */
export function hasWholeResponse(text: string, from = 0): boolean {
  const rest = text.slice(from);
  const headEnd = rest.indexOf('\r\n\r\n');
  if (headEnd === -1) return false;
  if (/\r\ntransfer-encoding: *chunked/i.test(rest.slice(0, headEnd))) return rest.endsWith('\r\n0\r\n\r\n');
  const length = /\r\ncontent-length: *(\d+)/i.exec(rest.slice(0, headEnd));
  return length?.[1] !== undefined && rest.length - headEnd - 4 >= Number(length[1]);
}

/** The status of the last response begun in `text`, or 0. */
export function lastStatus(text: string): number {
  const statuses = [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)];
  return statuses.length === 0 ? 0 : Number(statuses.at(-1)![1]);
}
