import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Loopback servers and real clients: give slow CI machines room, but a hang still fails.
    testTimeout: 20_000,
    hookTimeout: 20_000,
    pool: 'forks',
    // Ends the processes a test file started, also when a test failed before its own cleanup.
    setupFiles: ['test/support/setup.ts'],
  },
});
