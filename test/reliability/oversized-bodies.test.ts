import { connect, type Socket } from 'node:net';
import { Agent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { FakeUpstream } from '../support/fake-upstream.js';
import { type Proxy, sharedForSuite, startProxy } from '../support/proxy.js';

/**
 * Issue 14, "413 arrives as EPIPE": a chat body over `limits.body_bytes`
 * (32 MiB by default) gets its 413 read by the client, on a fresh connection
 * or a kept-alive one, rather than a reset while it is still uploading (the
 * openai SDK then retried, uploading 40 MB eight times for five calls).
 */

const CHAT = '/v1/chat/completions';
const BODY_BYTES = 40 * 1024 * 1024;
const ATTEMPTS = 10;
const PIECE = Buffer.alloc(1024 * 1024, 'x');

let upstream: FakeUpstream;
let proxy: Proxy;

sharedForSuite({ listen: true }, (started) => {
  ({ upstream, proxy } = started);
});

interface Attempt {
  readonly status: number;
  readonly body: string;
  /** The socket error seen while sending or reading (EPIPE, ECONNRESET), if any. */
  readonly error: string | null;
  /** Body bytes written before the answer was whole or the connection ended. */
  readonly sent?: number;
}

/** One connection to the proxy, on which whole requests are written and their answers read, one after another. */
class RawConnection {
  readonly #socket: Socket;
  #received = Buffer.alloc(0);
  #error: string | null = null;
  #closed = false;
  #wake: (() => void) | null = null;

  private constructor(socket: Socket) {
    this.#socket = socket;
    socket.on('data', (chunk: Buffer) => {
      this.#received = Buffer.concat([this.#received, chunk]);
      this.#wake?.();
    });
    socket.on('error', (error: Error & { code?: string }) => {
      this.#error ??= error.code ?? error.message;
      this.#wake?.();
    });
    socket.on('drain', () => this.#wake?.());
    socket.on('close', () => {
      this.#closed = true;
      this.#wake?.();
    });
  }

  static open(url: string): Promise<RawConnection> {
    const { hostname, port } = new URL(url);
    return new Promise((resolve, reject) => {
      const socket = connect({ host: hostname, port: Number(port) }, () => resolve(new RawConnection(socket)));
      socket.once('error', reject);
    });
  }

  async #until(done: () => boolean): Promise<void> {
    while (!done() && !this.#closed && this.#error === null) await new Promise<void>((resolve) => (this.#wake = resolve));
  }

  /** Writes a chat request of `bytes` body bytes, announced by Content-Length, as a client uploading it would (respecting backpressure). */
  async send(bytes: number): Promise<Attempt> {
    this.#received = Buffer.alloc(0);
    this.#socket.write(`POST ${CHAT} HTTP/1.1\r\nHost: compactor\r\nContent-Type: application/json\r\nContent-Length: ${bytes}\r\n\r\n`);
    let sent = 0;
    for (; sent < bytes && !this.#closed && this.#error === null; sent += PIECE.length) {
      if (!this.#socket.write(PIECE.subarray(0, Math.min(PIECE.length, bytes - sent)))) await this.#until(() => this.#socket.writableLength === 0);
    }
    await this.#until(() => responseLength(this.#received) !== null);
    const length = responseLength(this.#received);
    const text = this.#received.toString('latin1');
    return {
      status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0),
      body: length === null ? '' : text.slice(text.indexOf('\r\n\r\n') + 4, length),
      error: this.#error,
      sent,
    };
  }

  close(): void {
    this.#socket.destroy();
  }
}

/** The length of the first whole response in `received` (head and Content-Length body), or null before it is all there. */
function responseLength(received: Buffer): number | null {
  const text = received.toString('latin1');
  const headEnd = text.indexOf('\r\n\r\n');
  if (headEnd === -1) return null;
  const length = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, headEnd));
  const total = headEnd + 4 + Number(length?.[1] ?? 0);
  return received.length >= total ? total : null;
}

function expectTooLarge(attempt: Attempt, which: string): void {
  expect(attempt.error, which).toBeNull();
  expect(attempt.status, which).toBe(413);
  const parsed = JSON.parse(attempt.body) as { error: Record<string, unknown> };
  expect(Object.keys(parsed.error).sort()).toEqual(['code', 'message', 'param', 'type']);
  expect(parsed.error).toMatchObject({ type: 'invalid_request_error', code: 'request_too_large' });
}

describe('a 40 MB chat body (limits.body_bytes 32 MiB)', () => {
  it(`on ${ATTEMPTS} fresh connections: every one reads the 413 in OpenAI's shape, no EPIPE or reset`, async () => {
    for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
      const connection = await RawConnection.open(proxy.url);
      try {
        expectTooLarge(await connection.send(BODY_BYTES), `attempt ${attempt}`);
      } finally {
        connection.close();
      }
    }
    expect(upstream.requests).toHaveLength(0);
  });

  it(`${ATTEMPTS} times on one kept-alive connection: every one reads the 413, and the connection serves the next`, async () => {
    const connection = await RawConnection.open(proxy.url);
    try {
      for (let attempt = 1; attempt <= ATTEMPTS; attempt++) expectTooLarge(await connection.send(BODY_BYTES), `attempt ${attempt}`);
    } finally {
      connection.close();
    }
    expect(upstream.requests).toHaveLength(0);
  });

  it(`with undici on one kept-alive pool: ${ATTEMPTS} answers of 413, none an error`, async () => {
    const agent = new Agent({ connections: 1 });
    const body = Buffer.alloc(BODY_BYTES, 'x');
    try {
      for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
        const answer = await request(proxy.url + CHAT, { method: 'POST', headers: { 'content-type': 'application/json' }, body, dispatcher: agent });
        expectTooLarge({ status: answer.statusCode, body: await answer.body.text(), error: null }, `attempt ${attempt}`);
      }
    } finally {
      await agent.close();
    }
  });
});

describe('the rest of a body is read within bounds', () => {
  it('a body announced far over the limit gets its 413, then its connection is cut after 64 MiB more (4 × a small limit is less)', async () => {
    const small = await startProxy(upstream, { listen: true, config: { limits: { body_bytes: 64 * 1024 } } });
    try {
      const connection = await RawConnection.open(small.url);
      try {
        const attempt = await connection.send(1024 * 1024 * 1024);
        expect(attempt.status).toBe(413);
        expect(JSON.parse(attempt.body)).toMatchObject({ error: { code: 'request_too_large' } });
        // 64 MiB dropped, plus what the kernel's socket buffers held when the connection was cut.
        expect(attempt.sent).toBeGreaterThanOrEqual(64 * 1024 * 1024);
        expect(attempt.sent).toBeLessThan(96 * 1024 * 1024);
      } finally {
        connection.close();
      }
    } finally {
      await small.close();
    }
  });
});
