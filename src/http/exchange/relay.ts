import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';

/**
 * How a relay ended: the source ended (the caller ends the response), the
 * source failed (the caller decides how the client learns it), or the client
 * went away (the caller aborts the upstream request).
 */
export type RelayEnd =
  | { readonly kind: 'ended'; readonly bytes: number }
  | { readonly kind: 'failed'; readonly bytes: number; readonly error: Error }
  | { readonly kind: 'client-closed'; readonly bytes: number };

/** Sees each chunk after it was handed to the client; must not throw. An object the caller has anyway (the SSE tap), not a closure per request. */
export interface ChunkTap {
  write(chunk: Buffer): void;
}

/**
 * How much of an answer may wait for a slow client while the source is
 * read on (`ahead`): the upstream's answer is taken in up to `maxBytes`
 * ahead of the client, so it ends (and its llama-server slot is given back)
 * when the upstream is done, not when the client has read it.
 */
export interface ReadAhead {
  readonly maxBytes: number;
}

function ignore(): void {}

/**
 * Writes the source to the client chunk by chunk as it arrives, backpressure
 * respected: the source pauses while the client's socket is full, or, with
 * `ahead`, only once more than its `maxBytes` wait for the client (they are
 * held in the response's buffer). The response is not ended here, so the
 * caller can append an error event after a failure.
 */
export function relay(source: Readable, target: ServerResponse, tap?: ChunkTap, ahead?: ReadAhead): Promise<RelayEnd> {
  return new Promise((resolve) => {
    let bytes = 0;
    let settled = false;

    const onData = (chunk: Buffer): void => {
      bytes += chunk.length;
      if (!target.write(chunk) && (ahead === undefined || target.writableLength > ahead.maxBytes)) source.pause();
      tap?.write(chunk);
    };
    const onDrain = (): void => {
      source.resume();
    };
    const finish = (end: RelayEnd): void => {
      if (settled) return;
      settled = true;
      source.off('data', onData);
      source.off('end', onEnd);
      source.off('error', onError);
      // The caller may still destroy or abort the source; its late error must not go unhandled.
      source.on('error', ignore);
      source.off('close', onSourceClose);
      target.off('drain', onDrain);
      target.off('close', onTargetClose);
      resolve(end);
    };
    const onEnd = (): void => finish({ kind: 'ended', bytes });
    const onError = (error: Error): void => finish({ kind: 'failed', bytes, error });
    // A source destroyed without an error still did not end: treat it as a failure.
    const onSourceClose = (): void => {
      if (!source.readableEnded) finish({ kind: 'failed', bytes, error: new Error('the upstream response closed early') });
    };
    const onTargetClose = (): void => finish({ kind: 'client-closed', bytes });

    if (target.destroyed || target.closed) {
      finish({ kind: 'client-closed', bytes });
      return;
    }
    source.on('data', onData);
    source.once('end', onEnd);
    source.once('error', onError);
    source.once('close', onSourceClose);
    target.on('drain', onDrain);
    target.once('close', onTargetClose);
  });
}

/**
 * Calls `callback` when the client goes away before its response was ended,
 * and `onClose` (when given) whenever the response closes: one listener for
 * both. Watches the response's `close`, not the request's: the request
 * closes as soon as its body has been read.
 */
export function onClientGone(response: ServerResponse, callback: () => void, onClose?: () => void): void {
  response.once('close', () => {
    onClose?.();
    if (!response.writableEnded) callback();
  });
}
