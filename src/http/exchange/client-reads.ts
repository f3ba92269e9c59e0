import type { ServerResponse } from 'node:http';

/**
 * Whether a client still reads its answer (issue 33 item 1). A relay that
 * takes the upstream's answer in ahead of the client (so the upstream's
 * llama-server slot is given back when the answer ends, not when a slow
 * client has read it) holds the rest for the client; a client that reads
 * none of it for `idleMs` is told to `onStalled`, as an upstream that sends
 * nothing for that long is cut. Progress is what the socket handed to the
 * kernel; nothing pending is never a stall. The watch ends with the
 * response (`finish`: all of it handed over, or `close`).
 */

// Looked at four times per idle period: a stall is seen within a quarter of idle_ms past it, at a timer's cost per answer.
const CHECKS_PER_IDLE = 4;

export function watchClientReads(response: ServerResponse, idleMs: number, onStalled: () => void): void {
  let handed = handedOver(response);
  let lastProgress = performance.now();
  const timer = setInterval(() => {
    const now = handedOver(response);
    if (now !== handed || response.writableLength === 0) {
      handed = now;
      lastProgress = performance.now();
      return;
    }
    if (performance.now() - lastProgress < idleMs) return;
    stop();
    onStalled();
  }, Math.max(1, Math.floor(idleMs / CHECKS_PER_IDLE)));
  timer.unref();
  const stop = (): void => {
    clearInterval(timer);
    response.off('finish', stop);
    response.off('close', stop);
  };
  response.once('finish', stop);
  response.once('close', stop);
}

/** Bytes the socket's writes completed (dispatched to the kernel), whatever still waits in its buffer. */
function handedOver(response: ServerResponse): number {
  const socket = response.socket;
  return socket === null ? 0 : socket.bytesWritten - socket.writableLength;
}
