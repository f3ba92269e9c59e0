import { pino, type DestinationStream } from 'pino';

/**
 * Lines to stdout are gathered up to this many bytes (some 15 request lines)
 * and written together, and at the latest every {@link STDOUT_FLUSH_MS}: each
 * asynchronous write is a round trip through libuv's thread pool, some 13 µs
 * of CPU on the proxy's core.
 */
const STDOUT_BATCH_BYTES = 4096;
const STDOUT_FLUSH_MS = 200;

/** A destination for pino's lines that can be flushed: by pino on `fatal`, by tests. */
export interface LineDestination extends DestinationStream {
  write(line: string): void;
  flush(callback?: (error?: Error) => unknown): void;
  flushSync(): void;
}

/**
 * The log lines' way to a file descriptor (stdout), written asynchronously
 * in batches by pino's own destination (sonic-boom), which handles what a
 * file, a pipe or a terminal does to a write: partial writes, `EAGAIN` (tried
 * again), `EPIPE` (logging stops), and the lines still gathered when the
 * process exits (written synchronously from its `exit` event).
 *
 * The destination holds the lines as bytes (`contentMode: 'buffer'`), each
 * line encoded once as it comes. In its default string mode it measured the
 * UTF-8 length of the batch gathered so far for every line (a string it
 * concatenated again each time, so flattened again each time), then encoded
 * each batch twice (for the write, and again to count what was written):
 * ~3–5 µs of CPU a line against ~1 here (bench/README.md, issue 40).
 */
export function stdoutLines(fd = 1): LineDestination {
  const destination = pino.destination({ dest: fd, sync: false, minLength: STDOUT_BATCH_BYTES, periodicFlush: STDOUT_FLUSH_MS, contentMode: 'buffer' });
  // In buffer mode sonic-boom's write takes bytes; its types know only its string mode.
  const writeBytes = destination.write.bind(destination) as unknown as (bytes: Buffer) => boolean;
  return {
    write: (line: string) => {
      writeBytes(Buffer.from(line));
    },
    flush: (callback) => destination.flush(callback),
    flushSync: () => destination.flushSync(),
  };
}
