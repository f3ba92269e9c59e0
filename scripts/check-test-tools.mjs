#!/usr/bin/env node
/**
 * Before `npm test`: the end-to-end suites start real programs from the
 * Debian packages (redis-server and redis-cli for the replica and cluster tests, chromium for the
 * dashboard's browser test, ripgrep for opencode's grep tool). Without them
 * those suites fail after minutes of timeouts; this says at once what is
 * missing and how to install it (.ci/run installs them itself).
 */
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

const TOOLS = [
  { command: 'redis-server', debianPackage: 'redis-server' },
  // The cluster tests join their three nodes with `redis-cli --cluster create` (redis-server depends on redis-tools).
  { command: 'redis-cli', debianPackage: 'redis-tools' },
  { command: 'chromium', debianPackage: 'chromium' },
  { command: 'rg', debianPackage: 'ripgrep' },
];

function onPath(command) {
  for (const directory of (process.env.PATH ?? '').split(delimiter)) {
    try {
      accessSync(join(directory, command), constants.X_OK);
      return true;
    } catch {
      // not in this directory
    }
  }
  return false;
}

const missing = TOOLS.filter((tool) => !onPath(tool.command));
if (missing.length > 0) {
  const packages = missing.map((tool) => tool.debianPackage).join(' ');
  process.stderr.write(
    `compactor's tests need ${missing.map((tool) => tool.command).join(', ')}, which this machine does not have.\n` +
      `On Debian or Ubuntu: sudo apt-get update && sudo apt-get install -y ${packages}\n`,
  );
  process.exit(1);
}
