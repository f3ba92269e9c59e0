import { describe, expect, it } from 'vitest';
import { Shutdown } from '../../src/http/shutdown.js';

describe('Shutdown', () => {
  it('ends every request still registered, with the reason, once', () => {
    const shutdown = new Shutdown();
    const ended: unknown[] = [];
    shutdown.onEnd((reason) => ended.push(['a', reason]));
    const forgetB = shutdown.onEnd((reason) => ended.push(['b', reason]));
    shutdown.onEnd((reason) => ended.push(['c', reason]));
    forgetB();
    expect(shutdown.ended).toBe(false);
    shutdown.endAll('grace over');
    shutdown.endAll('again');
    expect(shutdown.ended).toBe(true);
    expect(ended).toEqual([
      ['a', 'grace over'],
      ['c', 'grace over'],
    ]);
  });

  it('ends at once a request that registers after the end', () => {
    const shutdown = new Shutdown();
    shutdown.endAll('late');
    const ended: unknown[] = [];
    const forget = shutdown.onEnd((reason) => ended.push(reason));
    expect(ended).toEqual(['late']);
    forget();
  });
});
