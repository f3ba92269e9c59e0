import { describe, it, expect } from 'vitest';
import { isMarked, mark } from '../../src/transcript/marks.js';

describe('mark', () => {
  it('@example: prefixes the strategy in brackets', () => {
    expect(mark('summary', 'notes')).toBe('[compacted:summary] notes');
  });
});

describe('isMarked', () => {
  it('@example: a summary message is marked summary', () => {
    expect(isMarked({ role: 'user', content: '[compacted:summary] notes' }, 'summary')).toBe(true);
  });

  it('tells strategies apart, and accepts any strategy when none is given', () => {
    const steps = { role: 'assistant', content: mark('steps', 'notes') };
    expect(isMarked(steps)).toBe(true);
    expect(isMarked(steps, 'steps')).toBe(true);
    expect(isMarked(steps, 'summary')).toBe(false);
  });

  it('reads the first text part of array content', () => {
    expect(isMarked({ role: 'assistant', content: [{ type: 'text', text: mark('steps', 'n') }] }, 'steps')).toBe(true);
    expect(isMarked({ role: 'user', content: [{ type: 'image_url' }, { type: 'text', text: mark('summary', 'n') }] })).toBe(
      true,
    );
  });

  it('does not mark text that only mentions a mark, or no content', () => {
    expect(isMarked({ role: 'user', content: 'see [compacted:summary] above' })).toBe(false);
    expect(isMarked({ role: 'user', content: null })).toBe(false);
    expect(isMarked({ role: 'user' })).toBe(false);
  });
});
