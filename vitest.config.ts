import { configDefaults, defineConfig } from 'vitest/config';

const AGENTS = 'test/e2e/agents/**';

export default defineConfig({
  test: {
    // Loopback servers and real clients: give slow CI machines room, but a hang still fails.
    testTimeout: 20_000,
    hookTimeout: 20_000,
    pool: 'forks',
    // Ends the processes a test file started, also when a test failed before its own cleanup.
    setupFiles: ['test/support/setup.ts'],
    projects: [
      { extends: true, test: { name: 'core', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, AGENTS] } },
      // The agent CLIs have their own install (test/e2e/agents/package.json), made by this global setup
      // only when one of these files runs.
      { extends: true, test: { name: 'agents', include: [`${AGENTS}/*.test.ts`], globalSetup: ['test/e2e/agents/install.ts'] } },
    ],
  },
});
