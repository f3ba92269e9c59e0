import { setImmediate as nextTurnOfTheEventLoop } from 'node:timers/promises';

/**
 * From this many messages on, each pass over a history (validating, hashing,
 * sizing, rendering) takes tens of milliseconds; the engine lets the event
 * loop run between passes so other requests' streams do not stall behind it.
 */
const LONG_HISTORY_MESSAGES = 5_000;

/** Lets the event loop run once before the next pass over a long history. */
export async function yieldOnLongHistory(messageCount: number): Promise<void> {
  if (messageCount >= LONG_HISTORY_MESSAGES) await nextTurnOfTheEventLoop();
}
