import { describe, expect, it } from 'vitest';
import { ExchangeAbort } from '../../src/upstream/exchange-abort.js';

describe('ExchangeAbort', () => {
  it('aborts its emitter (for undici) and a signal made before the abort, once', () => {
    const abort = new ExchangeAbort();
    const signal = abort.signal;
    let emitted = 0;
    abort.emitter.on('abort', () => emitted++);
    expect(abort.aborted).toBe(false);
    expect(abort.emitter.aborted).toBe(false);
    abort.abort();
    abort.abort();
    expect(abort.aborted).toBe(true);
    expect(abort.emitter.aborted).toBe(true);
    expect(signal.aborted).toBe(true);
    expect(emitted).toBe(1);
  });

  it('gives an aborted signal when first asked after the abort, and the same signal each time', () => {
    const abort = new ExchangeAbort();
    abort.abort();
    expect(abort.signal.aborted).toBe(true);
    expect(abort.signal).toBe(abort.signal);
  });
});
