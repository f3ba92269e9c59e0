/**
 * Which server of a fleet a conversation calls home (issue 39), pure: the
 * servers in the order a request tries them. Its home first while it is
 * healthy (where its prefix already lives: its KV cache is there); else,
 * among the healthy servers that serve its model, the one with the most free
 * slots, then the least queued work, then the fewest conversations for its
 * weight (so idle servers fill evenly), then the first listed. The others
 * follow in the same order: where a request goes when its server fails
 * before answering.
 */

export interface ServerLoad {
  /** Its place in `upstream.servers`. */
  readonly index: number;
  readonly healthy: boolean;
  /** It serves the model asked for (its `models`, or any while they are not known). */
  readonly serves: boolean;
  /** Slots nobody calls home with no request in them; null when not known (its slots not scheduled, or not found yet). */
  readonly freeSlots: number | null;
  /** Requests queued or in flight on it now. */
  readonly queued: number;
  /** Conversations that call it home. */
  readonly homes: number;
  readonly weight: number;
}

function better(a: ServerLoad, b: ServerLoad, bySlots: boolean): number {
  if (bySlots && a.freeSlots !== b.freeSlots) return b.freeSlots! - a.freeSlots!;
  const queued = a.queued / a.weight - b.queued / b.weight;
  if (queued !== 0) return queued;
  const homes = a.homes / a.weight - b.homes / b.weight;
  if (homes !== 0) return homes;
  return a.index - b.index;
}

/**
 * The order to try the servers in for a conversation whose home is `home`
 * (an index, or null for none yet). Healthy servers come first; when none is
 * healthy every server is tried, in the same order (a probe may lag behind a
 * server that just came back). Servers that serve the model come before
 * those that do not, so a request for a model nobody lists still goes somewhere.
 *
 * @example
 * serverOrder([{ index: 0, healthy: true, … freeSlots: 0 }, { index: 1, healthy: true, … freeSlots: 2 }], null) // → [1, 0]
 */
export function serverOrder(loads: readonly ServerLoad[], home: number | null): number[] {
  const healthy = loads.filter((load) => load.healthy);
  const pool = healthy.length > 0 ? healthy : loads;
  // Free slots count only once every server's are known: a server not asked yet is not one with no free slot.
  const bySlots = pool.every((load) => load.freeSlots !== null);
  const ranked = [...pool].sort((a, b) => (a.serves === b.serves ? better(a, b, bySlots) : a.serves ? -1 : 1)).map((load) => load.index);
  const homeLoad = home === null ? undefined : pool.find((load) => load.index === home);
  if (homeLoad === undefined) return ranked;
  return [home!, ...ranked.filter((index) => index !== home)];
}
