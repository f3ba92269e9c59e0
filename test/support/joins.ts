import { vi } from 'vitest';

/**
 * Counts the buffers of `atLeast` bytes or more that `Buffer.concat` makes
 * from now on in compactor (on a body's receipt, in its write-back), not in
 * the test's upstream double, which joins what it was sent (issue 34: a
 * 32 MiB copy at once holds the event loop). Restored by
 * `vi.restoreAllMocks()`.
 */
export function largeJoins(atLeast: number): { readonly largest: number; readonly count: number } {
  const original = Buffer.concat.bind(Buffer);
  const seen = { largest: 0, count: 0 };
  vi.spyOn(Buffer, 'concat').mockImplementation((list: readonly Uint8Array[], length?: number) => {
    const joined = original(list, length);
    if (joined.length >= atLeast && !(new Error().stack ?? '').includes('fake-upstream')) {
      seen.largest = Math.max(seen.largest, joined.length);
      seen.count++;
    }
    return joined;
  });
  return seen;
}
