import { describe, expect, it } from 'vitest';
import { type ServerLoad, serverOrder } from '../../src/fleet/home-choice.js';

/** Which server a conversation calls home (issue 39), pure. */

const idle = (index: number, fields: Partial<ServerLoad> = {}): ServerLoad => ({ index, healthy: true, serves: true, freeSlots: 2, queued: 0, homes: 0, weight: 1, ...fields });

describe('serverOrder', () => {
  it('keeps a healthy home first, whatever the others offer', () => {
    expect(serverOrder([idle(0, { freeSlots: 4 }), idle(1, { freeSlots: 0, queued: 9 })], 1)).toEqual([1, 0]);
  });

  it('chooses anew when the home is taken out', () => {
    expect(serverOrder([idle(0), idle(1, { healthy: false })], 1)).toEqual([0]);
  });

  it('prefers the most free slots, then the least queued work for its weight, then the fewest homes for its weight', () => {
    expect(serverOrder([idle(0, { freeSlots: 1 }), idle(1, { freeSlots: 2 })], null)).toEqual([1, 0]);
    expect(serverOrder([idle(0, { queued: 2 }), idle(1, { queued: 1 })], null)).toEqual([1, 0]);
    expect(serverOrder([idle(0, { queued: 2, weight: 4 }), idle(1, { queued: 1 })], null)).toEqual([0, 1]);
    expect(serverOrder([idle(0, { homes: 3 }), idle(1, { homes: 2 }), idle(2, { homes: 3, weight: 2 })], null)).toEqual([2, 1, 0]);
  });

  it('compares free slots only once every server reported them', () => {
    expect(serverOrder([idle(0, { freeSlots: 1, homes: 1 }), idle(1, { freeSlots: null })], null)).toEqual([1, 0]);
  });

  it('puts servers of the model first, and tries every server when none is healthy', () => {
    expect(serverOrder([idle(0, { serves: false }), idle(1, { homes: 5 })], null)).toEqual([1, 0]);
    expect(serverOrder([idle(0, { healthy: false, homes: 1 }), idle(1, { healthy: false })], null)).toEqual([1, 0]);
  });
});
