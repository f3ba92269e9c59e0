import { STATUS_CODES, maxHeaderSize } from 'node:http';
import type { Socket } from 'node:net';
import { HeadersTooLargeError, InvalidRequestError, type ProxyError, RequestTimeoutError } from '../../errors.js';

/**
 * Answers what Node's HTTP parser refuses before any route runs (a header
 * block over its limit, `Content-Length` together with `Transfer-Encoding`, a
 * malformed request line or chunk) in OpenAI's error shape, like every other
 * error of compactor, then closes the connection: after a framing error the
 * rest of its bytes cannot be trusted to start a request.
 */

function errorFor(code: string | undefined): ProxyError {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return new HeadersTooLargeError(maxHeaderSize);
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new RequestTimeoutError();
    default:
      return new InvalidRequestError({ code: 'invalid_request', message: 'the request is not valid HTTP/1.1' });
  }
}

export function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  // The client is gone: there is no one to answer.
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  if (socket.writable) {
    const proxyError = errorFor(error.code);
    const body = JSON.stringify(proxyError.toBody());
    socket.write(
      `HTTP/1.1 ${proxyError.status} ${STATUS_CODES[proxyError.status] ?? ''}\r\n` +
        `content-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}
