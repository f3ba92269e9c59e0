import { loadConfig } from '../config/load.js';
import { CHECKS } from './checks.js';
import { fleetChecks } from './fleet-checks.js';
import { doctorContext } from './questions.js';
import { lineOf, runChecks } from './verdicts.js';

/**
 * `compactor doctor [options]`: the proxy's own options and variables
 * (`--config`, `--upstream`, `COMPACTOR_*`), read the same way; one line per
 * check, then `all well` (exit 0) or the first thing to fix (exit 1).
 */

export const DOCTOR_USAGE = `Usage: compactor doctor [options]

Reads the configuration as compactor does (the same --config, flags and COMPACTOR_* variables),
asks the upstream and the store, and prints one line per check. Exit 0 when all is well,
1 with the first thing to fix.`;

export async function runDoctor(argv: readonly string[], env: Readonly<Record<string, string | undefined>>, write: (text: string) => void): Promise<0 | 1> {
  const loaded = loadConfig({ argv, env });
  if (!loaded.ok) {
    write(`${lineOf('config', { verdict: 'fail', text: `invalid: ${loaded.errors.join('; ')}` })}\n`);
    write(`first thing to fix: the configuration (${loaded.errors[0] ?? 'invalid'})\n`);
    return 1;
  }
  if (loaded.help) {
    write(`${DOCTOR_USAGE}\n`);
    return 0;
  }
  write(`${lineOf('config', { verdict: 'ok', text: loaded.file === null ? 'defaults and COMPACTOR_* variables (no file)' : loaded.file })}\n`);
  for (const notice of loaded.notices) write(`${lineOf('config', { verdict: 'warn', text: notice })}\n`);
  const context = doctorContext(loaded.config, loaded.file);
  try {
    // A fleet: a line per server first (issue 39); the other checks ask the first one.
    const report = await runChecks([...fleetChecks(loaded.config), ...CHECKS], context);
    write(`${report.lines.join('\n')}\n`);
    return report.exitCode;
  } finally {
    await context.close();
  }
}
