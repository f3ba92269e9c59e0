import { describe, expect, it } from 'vitest';
import { ENVIRONMENT_VARIABLES } from '../../src/config/load.js';
import { USAGE } from '../../src/config/help-text.js';

/**
 * Issue 37: `--help` did not list COMPACTOR_MAX_CONNECTIONS nor
 * COMPACTOR_REDUCE_MEMORY, which compactor reads. The list is the one the
 * loader reads from (and refuses unknown names against), so a variable added
 * there without a line here fails this test.
 */
describe('--help', () => {
  it('lists every COMPACTOR_* variable compactor reads', () => {
    expect(ENVIRONMENT_VARIABLES).toContain('COMPACTOR_MAX_CONNECTIONS');
    const missing = ENVIRONMENT_VARIABLES.filter((name) => !new RegExp(`\\b${name}\\b`).test(USAGE));
    expect(missing).toEqual([]);
  });
});

describe('a misspelled configuration key', () => {
  it('gets the closest key of its section, as a misspelled variable does; a key far from every one gets none', async () => {
    const { parseConfig } = await import('../../src/config/schema.js');
    const result = parseConfig({ listen: { prot: 8081 }, models: { qwen: { contxt_window: 4096 } }, compaction: { treshold: 0.7 }, nonsense_section: {} });
    expect(result.ok ? [] : result.errors).toEqual(
      expect.arrayContaining([
        'listen.prot: unknown key (did you mean listen.port?)',
        'models.qwen.contxt_window: unknown key (did you mean models.qwen.context_window?)',
        'compaction.treshold: unknown key (did you mean compaction.threshold?)',
        'nonsense_section: unknown key',
      ]),
    );
  });
});
