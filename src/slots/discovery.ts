/**
 * How many slots a llama-server serves: `total_slots` of `GET /props`, else
 * the length of `GET /slots` (answered only with `--slots`, on by default in
 * recent builds). A server that reports neither (another server, a proxy in
 * between) gets no slot scheduling: requests go as they do without it.
 */

/**
 * The slot count from the answers of `/props` and `/slots` (either may be
 * undefined: not asked, not JSON, not found), or null for none.
 *
 * @example
 * slotCountOf({ total_slots: 4 }, undefined) // → 4
 */
export function slotCountOf(props: unknown, slots: unknown): number | null {
  if (typeof props === 'object' && props !== null && !Array.isArray(props)) {
    const total = (props as Record<string, unknown>)['total_slots'];
    if (Number.isInteger(total) && (total as number) > 0) return total as number;
  }
  if (Array.isArray(slots) && slots.length > 0 && slots.every((slot) => typeof slot === 'object' && slot !== null && 'id' in slot)) return slots.length;
  return null;
}
