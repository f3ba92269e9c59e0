/** A clock the test moves by hand. */
export function manualClock(start = 1_000_000): { now: () => number; advance: (milliseconds: number) => void } {
  let time = start;
  return { now: () => time, advance: (milliseconds) => (time += milliseconds) };
}
