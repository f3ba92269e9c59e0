import type { Socket } from 'node:net';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { continueHead, skipContinueResponses } from '../../src/upstream/skip-continue.js';

/** A stand-in for the socket: what it is written, and what reaches the stream (what undici would read). */
function fakeSocket(): { socket: Socket; read: () => string; ended: () => boolean } {
  const pushed: Buffer[] = [];
  let ended = false;
  const socket = {
    write: () => true,
    push(chunk: Buffer | null): boolean {
      if (chunk === null) ended = true;
      else pushed.push(chunk);
      return true;
    },
  } as unknown as Socket;
  skipContinueResponses(socket);
  return { socket, read: () => Buffer.concat(pushed).toString('latin1'), ended: () => ended };
}

function readInPieces(socket: Socket, bytes: string, cuts: readonly number[]): void {
  let start = 0;
  for (const cut of [...new Set(cuts)].sort((a, b) => a - b)) {
    socket.push(Buffer.from(bytes.slice(start, cut), 'latin1'));
    start = cut;
  }
  socket.push(Buffer.from(bytes.slice(start), 'latin1'));
}

const REQUEST = 'POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n';
// Its body holds a 100 head: bytes of an answer already under way are never looked at.
const ANSWER = 'HTTP/1.1 200 OK\r\ncontent-length: 25\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n';

describe('skipContinueResponses', () => {
  it('drops 100 heads before the answer to each request, however the reads cut them', () => {
    const continues = ['HTTP/1.1 100 Continue\r\n\r\n', 'HTTP/1.0 100\r\n\r\n', 'HTTP/1.1 100 Continue\r\nx-a: 1\r\n\r\n'];
    const exchange = fc.tuple(fc.array(fc.constantFrom(...continues), { maxLength: 3 }), fc.array(fc.nat(), { maxLength: 8 }));
    fc.assert(
      fc.property(fc.array(exchange, { minLength: 1, maxLength: 3 }), (exchanges) => {
        const { socket, read } = fakeSocket();
        let expected = '';
        for (const [heads, cuts] of exchanges) {
          socket.write(REQUEST, 'latin1');
          const bytes = heads.join('') + ANSWER;
          readInPieces(socket, bytes, cuts.map((cut) => cut % (bytes.length + 1)));
          expected += ANSWER;
        }
        expect(read()).toBe(expected);
      }),
    );
  });

  it('leaves everything else alone: 103, bytes before any request, and a body written after the answer began', () => {
    const { socket, read } = fakeSocket();
    socket.push(Buffer.from('HTTP/1.1 100 Continue\r\n\r\n'));
    socket.write(REQUEST, 'latin1');
    socket.push(Buffer.from('HTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 200 OK\r\n'));
    socket.write(Buffer.from('the rest of a streamed request body'));
    socket.write('\r\n0\r\n\r\n', 'latin1');
    socket.push(Buffer.from('HTTP/1.1 100 Continue\r\n\r\n'));
    expect(read()).toBe('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 200 OK\r\nHTTP/1.1 100 Continue\r\n\r\n');
  });

  it('a connection that ends inside a 100 head hands its bytes on, then the end', () => {
    const { socket, read, ended } = fakeSocket();
    socket.write(REQUEST, 'latin1');
    socket.push(Buffer.from('HTTP/1.1 100 Cont'));
    expect(read()).toBe('');
    socket.push(null);
    expect(read()).toBe('HTTP/1.1 100 Cont');
    expect(ended()).toBe(true);
  });

  it('continueHead tells a 100 head, another answer, and too little to tell apart', () => {
    expect(continueHead(Buffer.from('HTTP/1.1 100 Continue\r\n\r\nrest'))).toEqual({ kind: 'continue', end: 25 });
    expect(continueHead(Buffer.from('HTTP/1.1 10'))).toEqual({ kind: 'wait' });
    expect(continueHead(Buffer.from('HTTP/1.1 100 Continue\r\n'))).toEqual({ kind: 'wait' });
    expect(continueHead(Buffer.from('HTTP/1.1 101 Switching'))).toEqual({ kind: 'answer' });
    expect(continueHead(Buffer.from('HTTP/1.1 1000'))).toEqual({ kind: 'answer' });
    expect(continueHead(Buffer.from('HTTP/2 100'))).toEqual({ kind: 'answer' });
    // A head that never ends is not held without bound: undici gets it and rejects it.
    expect(continueHead(Buffer.from(`HTTP/1.1 100 Continue\r\nx: ${'a'.repeat(20_000)}`))).toEqual({ kind: 'answer' });
  });
});
