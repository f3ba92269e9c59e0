/**
 * Work over a whole history that may stop between slices (issue 21): a
 * generator that yields after each slice of items. An ordinary request runs
 * it to the end at once (`runNow`: no pause, no promise); a large body runs
 * it with a turn of the event loop at each yield (`runInSlices`), so a pass
 * over 50,000 messages never holds the loop for all of them. The core does
 * no I/O: the caller gives the pause.
 */

/** Work that yields where it may pause, and returns its result. */
export type Slices<T> = Generator<void, T, undefined>;

/** Items handled between two places a pause may come: a few milliseconds of work at most. */
export const SLICE_ITEMS = 2048;

/** Whether a pause may come after item `index` (0-based) of a loop. */
export function sliceEndsAt(index: number): boolean {
  return index % SLICE_ITEMS === SLICE_ITEMS - 1;
}

/** Bytes copied between two places a pause may come when parts are joined. */
export const JOIN_SLICE_BYTES = 1024 * 1024;

/**
 * `parts` joined into one buffer, a pause allowed after every
 * `JOIN_SLICE_BYTES` copied: a 32 MiB body written back, or taken off a
 * connection in chunks, is never copied all at once (issue 34).
 */
export function* joinedInSlices(parts: readonly Uint8Array[]): Slices<Buffer> {
  let length = 0;
  for (const part of parts) length += part.length;
  const joined = Buffer.allocUnsafe(length);
  let at = 0;
  let sincePause = 0;
  for (const part of parts) {
    joined.set(part, at);
    at += part.length;
    sincePause += part.length;
    if (sincePause >= JOIN_SLICE_BYTES) {
      sincePause = 0;
      yield;
    }
  }
  return joined;
}

/** Runs `steps` to the end without pausing. */
export function runNow<T>(steps: Slices<T>): T {
  let next = steps.next();
  while (next.done !== true) next = steps.next();
  return next.value;
}

/** Runs `steps` to the end, awaiting `pause` (the caller's turn of the event loop) at each yield. */
export async function runInSlices<T>(steps: Slices<T>, pause: () => Promise<unknown>): Promise<T> {
  let next = steps.next();
  while (next.done !== true) {
    await pause();
    next = steps.next();
  }
  return next.value;
}
