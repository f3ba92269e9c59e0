import type { Check, DoctorContext, Finding, Verdict } from './check.js';

/** How each verdict is marked at the start of its line. */
const MARKS: Readonly<Record<Verdict, string>> = { ok: 'ok  ', warn: 'warn', fail: 'FAIL', skip: '--  ' };

export interface DoctorReport {
  readonly lines: readonly string[];
  /** 0 when no check failed, 1 otherwise. */
  readonly exitCode: 0 | 1;
}

/** One check's line: its verdict, its name, what it found. */
export function lineOf(name: string, finding: Finding): string {
  return `${MARKS[finding.verdict]} ${name.padEnd(12)} ${finding.text}`;
}

/** Runs the checks in order (each one's questions are shared through `context`) and closes with the first thing to fix. */
export async function runChecks(checks: readonly Check[], context: DoctorContext): Promise<DoctorReport> {
  const lines: string[] = [];
  let firstFix: string | undefined;
  for (const check of checks) {
    let finding: Finding;
    try {
      finding = await check.run(context);
    } catch (error) {
      // A check that throws is a bug of the doctor, not of the setup: said as such, and not hidden.
      const reason = error instanceof Error ? error.message : String(error);
      finding = { verdict: 'fail', text: `the check itself failed: ${reason}`, fix: `report this: compactor doctor's ${check.name} check failed (${reason})` };
    }
    lines.push(lineOf(check.name, finding));
    if (finding.verdict === 'fail' && firstFix === undefined) firstFix = finding.fix ?? finding.text;
  }
  lines.push(firstFix === undefined ? 'all well' : `first thing to fix: ${firstFix}`);
  return { lines, exitCode: firstFix === undefined ? 0 : 1 };
}
