import { describe, expect, it } from 'vitest';
import { BodiesInFlightError } from '../../src/errors.js';
import { BodyBudget } from '../../src/http/edge/body-budget.js';

/**
 * Issue 34 item 2, `limits.in_flight_bytes`: four uncounted 28.6 MiB bodies
 * at once took 3.8 GB, six got no answer. The large bodies being read and
 * planned take their bytes from one bound; past it a newcomer waits its
 * turn, then gets a 503 in its format's shape. Order and waits are counted
 * (the budget's queue, the upstream's requests), never timed.
 */

describe('limits.in_flight_bytes', () => {
  it('a body that does not fit waits for the one before it, first come first served; one body always fits', async () => {
    const budget = new BodyBudget(100, 60_000);
    const first = await budget.take(60);
    const order: string[] = [];
    const second = budget.take(60).then((release) => (order.push('second'), release));
    const third = budget.take(30).then((release) => (order.push('third'), release));
    expect(budget.waiting).toBe(2);
    first();
    const releases = await Promise.all([second, third]);
    expect(order).toEqual(['second', 'third']);
    for (const release of releases) release();
    // Larger than the whole bound, alone: let in.
    (await budget.take(500))();
    expect(budget.waiting).toBe(0);
  });

  it('a body that waited too long is refused with a BodiesInFlightError naming the key', async () => {
    const budget = new BodyBudget(100, 0);
    const held = await budget.take(80);
    await expect(budget.take(80)).rejects.toBeInstanceOf(BodiesInFlightError);
    await expect(budget.take(80)).rejects.toThrow('limits.in_flight_bytes');
    expect(budget.waiting).toBe(0);
    held();
  });
});
