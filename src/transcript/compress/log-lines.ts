import { droppedLinesMarker, MARKER_PREFIX } from './markers.js';

/**
 * Logs and test output trimmed by what matters in them: the lines that say
 * something failed, the summary lines a test runner or build tool ends with,
 * and the first and last lines (the command's start and its final status).
 * Each run of dropped lines becomes one line saying how many went.
 */

/** A line that reports a problem: kept wherever it is. */
const PROBLEM_LINE = /\b(error|errors|fail|failed|failing|failure|exception|fatal|panic|traceback|assert\w*|expected|warning|denied|not found|undefined|cannot|can't|unable)\b|✗|✘|×|\bE\d{3,}\b/i;
/** A line that sums up a run (`Tests: 3 failed, 40 passed`, `12 passing (3s)`, `FAILED tests/x.py`, `exit code 1`). */
const SUMMARY_LINE = /\b(\d+\s+(passed|passing|failed|failing|skipped|pending|tests?|suites?|errors?|warnings?)|tests?:|test files|suites?:|summary|total|exit (code|status)|status:|finished|done in|compiled|took)\b/i;

/** Whether a line is one a trim keeps wherever it stands. */
function isKeptLine(line: string): boolean {
  return line.includes(MARKER_PREFIX) || PROBLEM_LINE.test(line) || SUMMARY_LINE.test(line);
}

/**
 * The output with the lines that matter kept, or null when it has too few
 * lines to trim or would not shrink by at least `minSavedShare` (trimming a
 * result changes the prompt; a small gain is not worth it).
 *
 * @example
 * trimLogLines(['$ npm test', ...Array(50).fill('  ok step'), 'FAIL src/a.test.ts', 'Tests: 1 failed, 50 passed'].join('\n'), 2, 0.3)
 * // keeps the first 2 lines, the FAIL line, the summary, the last 2 lines; the rest become markers
 */
export function trimLogLines(text: string, keepLines: number, minSavedShare: number): string | null {
  const lines = text.split('\n');
  if (lines.length <= 2 * keepLines + 2) return null;
  const kept: string[] = [];
  let dropped = 0;
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index]!;
    const edge = index < keepLines || index >= lines.length - keepLines;
    if (edge || isKeptLine(line)) {
      // A lone dropped line costs less than its marker: kept.
      if (dropped === 1) kept.push(lines[index - 1]!);
      else if (dropped > 1) kept.push(droppedLinesMarker(dropped));
      dropped = 0;
      kept.push(line);
    } else dropped++;
  }
  if (dropped > 0) kept.push(droppedLinesMarker(dropped));
  const result = kept.join('\n');
  return result.length <= text.length * (1 - minSavedShare) ? result : null;
}
