import { describe, expect, it } from 'vitest';
import { DASHBOARD_PAGE, openingConversation } from '../../../src/dashboard/page.js';

/** Issue 37: the dashboard opened on the most recent conversation even when it was a one-request "hi". */
describe('the conversation the dashboard opens on', () => {
  it('is the most recent one with two requests or a compaction, not a newer one-request "hi"', () => {
    const conversations = [
      { id: 'hi', requests: 1, epochs: 0 },
      { id: 'agent', requests: 40, epochs: 3 },
      { id: 'older', requests: 12, epochs: 1 },
    ];
    expect(openingConversation(conversations)).toBe('agent');
    expect(openingConversation([{ id: 'compacted-once', requests: 1, epochs: 1 }, { id: 'x', requests: 5, epochs: 0 }])).toBe('compacted-once');
  });

  it('is the most recent of all when none did anything yet, and none when there are none', () => {
    expect(openingConversation([{ id: 'hi', requests: 1, epochs: 0 }, { id: 'hello', requests: 1, epochs: 0 }])).toBe('hi');
    expect(openingConversation([])).toBeNull();
  });

  it('is the rule the page runs', () => {
    expect(DASHBOARD_PAGE).toContain('selected = openingConversation(state.conversations)');
    expect(DASHBOARD_PAGE).toContain('c.requests >= 2 || c.epochs > 0');
  });
});
