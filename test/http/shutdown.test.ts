import { describe, expect, it } from 'vitest';
import { Shutdown } from '../../src/http/ops/shutdown.js';

describe('Shutdown', () => {
  it('ends every request still registered, with the reason, once', () => {
    const shutdown = new Shutdown();
    const ended: unknown[] = [];
    shutdown.onEnd({ end: (reason) => ended.push(['a', reason]) });
    const b = { end: (reason: unknown) => ended.push(['b', reason]) };
    shutdown.onEnd(b);
    shutdown.onEnd({ end: (reason) => ended.push(['c', reason]) });
    shutdown.forget(b);
    shutdown.endAll('grace over');
    shutdown.endAll('again');
    expect(ended).toEqual([
      ['a', 'grace over'],
      ['c', 'grace over'],
    ]);
  });

  it('ends at once a request that registers after the end', () => {
    const shutdown = new Shutdown();
    shutdown.endAll('late');
    const ended: unknown[] = [];
    const late = { end: (reason: unknown) => ended.push(reason) };
    shutdown.onEnd(late);
    expect(ended).toEqual(['late']);
    shutdown.forget(late);
  });
});
