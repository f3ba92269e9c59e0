/**
 * Shell commands read as a reviewer would: `cd src && cat billing.py` prints
 * a file, `git show HEAD~1:src/billing.py` prints a file as it was,
 * `npm test` and `ls -la` print command output that running them again
 * replaces. A command is split at `&&`, `||`, `;`, `|` and new lines; `cd`
 * and environment settings in front only say where it runs. When a command
 * is neither a read nor one of the commands recognized here, it is `other`:
 * its text is never trimmed nor superseded.
 */

/** What a call is to compression (calls.ts): a read, an idempotent command, or other. */
export type CallKind = 'read' | 'command' | 'other';

/** Argument names that carry a shell command (bash `command`, Codex `shell {command: [...]}`, `cmd`, `script`). */
const COMMAND_ARGUMENTS = ['command', 'cmd', 'script', 'commandline', 'command_line'];

/** The shell command a call runs, when one of its arguments holds one (a list is Codex's argv: `["bash", "-lc", "…"]`). */
export function shellCommandOf(args: Readonly<Record<string, unknown>>): string | null {
  for (const [key, value] of Object.entries(args)) {
    if (!COMMAND_ARGUMENTS.includes(key.toLowerCase())) continue;
    if (typeof value === 'string') return value;
    if (Array.isArray(value) && value.every((part) => typeof part === 'string')) {
      const argv = value as string[];
      // `bash -lc "…"`: the script is the last word.
      return argv.length >= 3 && /^(ba|z)?sh$/.test(argv[0]!.replace(/^.*\//, '')) && argv[1]!.startsWith('-') ? argv.at(-1)! : argv.join(' ');
    }
  }
  return null;
}

/** Commands that print a file, as their first word (`sed` only with `-n`, `tail` never with `-f`). */
const READ_WORDS = new Set(['cat', 'head', 'tail', 'less', 'more', 'bat', 'nl', 'type', 'get-content']);
/**
 * Commands whose output is the state now, so running them again supersedes
 * the older output, and whose output is a log a trim may cut: test runners,
 * builds, linters and type checkers, listings and searches, git's status.
 */
const COMMAND_PATTERNS: readonly RegExp[] = [
  /^(npm|pnpm|yarn|bun)\s+(test|t|run\s+(test|build|lint|typecheck|check)\S*)\b/,
  /^(npx|pnpm\s+exec|yarn)\s+(vitest|jest|mocha|tsc|eslint|playwright|ava|tap)\b/,
  /^(vitest|jest|mocha|pytest|tsc|eslint|ruff|mypy|flake8|pylint|rspec|phpunit)\b/,
  /^python3?\s+-m\s+(pytest|unittest|mypy)\b/,
  /^(go)\s+(test|build|vet)\b/,
  /^cargo\s+(test|build|check|clippy)\b/,
  /^(make|mvn|gradle|\.\/gradlew|ninja|cmake\s+--build)\b/,
  /^dotnet\s+(test|build)\b/,
  /^(node\s+--test|deno\s+test|bun\s+test)\b/,
  /^(ls|tree|find|grep|egrep|rg|ag|fd|wc|du)\b/,
  /^git\s+(status|diff|log|branch)\b/,
];

/** A segment with its leading environment settings (`CI=1 npm test`) taken off. */
function withoutEnvironment(segment: string): string {
  return segment.replace(/^(\w+=\S*\s+)+/, '');
}

/** The file a print command shows: its one path operand (flags and `sed -n` scripts aside), or null. */
function printedPath(words: readonly string[]): string | null {
  const operands = words.slice(1).filter((word) => !word.startsWith('-'));
  const paths = words[0] === 'sed' ? operands.slice(1) : operands;
  return paths.length === 1 ? paths[0]!.replace(/^["']|["']$/g, '') : null;
}

/** Joins `dir` (a `cd` target, or null) and `path` as the command saw it. */
function joined(dir: string | null, path: string): string {
  if (dir === null || path.startsWith('/') || dir === '.') return path;
  return `${dir.replace(/\/+$/, '')}/${path}`;
}

/**
 * What a shell command is: a read when any of its parts prints a file (then
 * it is text to keep whole), a command when its first part that does
 * something is a recognized one, else other; and for a read of one file
 * (`cat`, `head`, `tail`, `sed -n` with one path, after a `cd`), its path.
 */
export function shellKind(command: string): { kind: CallKind; file: string | null } {
  const segments = command
    .split(/&&|\|\||;|\||\n/)
    .map((segment) => withoutEnvironment(segment.trim()))
    .filter((segment) => segment !== '');
  let dir: string | null = null;
  let first: string | null = null;
  let read: { file: string | null } | null = null;
  for (const segment of segments) {
    const words = segment.split(/\s+/);
    const word = words[0]!.toLowerCase();
    if (word === 'cd' || word === 'pushd') {
      if (first === null) dir = words[1] ?? null;
      continue;
    }
    first ??= segment;
    const follows = words.some((flag) => flag === '-f' || flag === '-F' || flag === '--follow');
    const prints = (READ_WORDS.has(word) && !(word === 'tail' && follows)) || (word === 'sed' && words.includes('-n'));
    const shows = word === 'git' && (words[1] === 'show' || (words[1] === 'cat-file' && words.includes('-p')));
    if (prints && read === null) {
      const path = printedPath(words);
      read = { file: path === null || segments.length > 2 ? null : joined(dir, path) };
    } else if (shows && read === null) read = { file: null };
  }
  if (read !== null) return { kind: 'read', file: segments.filter((segment) => !/^(cd|pushd)\b/.test(segment)).length === 1 ? read.file : null };
  if (first !== null && COMMAND_PATTERNS.some((pattern) => pattern.test(first!))) return { kind: 'command', file: null };
  return { kind: 'other', file: null };
}
