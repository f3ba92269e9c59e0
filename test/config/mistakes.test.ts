import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';

/** Plausible configuration mistakes get a message that fixes them (issue 22, item 7). */

function errorsOf(options: { argv?: string[]; env?: Record<string, string> }): string[] {
  const loaded = loadConfig({ argv: options.argv ?? [], env: options.env ?? {} });
  return loaded.ok ? [] : loaded.errors;
}

describe('configuration mistakes', () => {
  it('an unknown variable suggests the one closest by meaning, not by letters', () => {
    expect(errorsOf({ env: { COMPACTOR_URL: 'http://127.0.0.1:8080' } })).toEqual(['COMPACTOR_URL: unknown environment variable (did you mean COMPACTOR_UPSTREAM_URL?)']);
    expect(errorsOf({ env: { COMPACTOR_WINDOW: '4096' } })).toEqual(['COMPACTOR_WINDOW: unknown environment variable (did you mean COMPACTOR_CONTEXT_WINDOW?)']);
    expect(errorsOf({ env: { COMPACTOR_UPSTREAM: 'http://x' } })[0]).toContain('did you mean COMPACTOR_UPSTREAM_URL?');
    expect(errorsOf({ env: { COMPACTOR_PROT: '1' } })[0]).toContain('did you mean COMPACTOR_PORT?');
  });

  it('--upstream without a scheme says to add http://', () => {
    expect(errorsOf({ argv: ['--upstream', '127.0.0.1:8080'] })).toEqual(['upstream.url: expected a URL; add its scheme: http://127.0.0.1:8080 (from --upstream)']);
    expect(errorsOf({ argv: ['--upstream', 'not a url'] })).toEqual(['upstream.url: expected a URL (from --upstream)']);
  });
});
