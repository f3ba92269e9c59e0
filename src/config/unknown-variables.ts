/**
 * `COMPACTOR_*` variables compactor does not read, each as an error naming the
 * closest one it does: a typo (`COMPACTOR_UPSTREAM` for
 * `COMPACTOR_UPSTREAM_URL`) would otherwise be ignored in silence, as an
 * unknown YAML key would not be. Closest by meaning first: the known name
 * sharing most words with it (`COMPACTOR_URL` → `COMPACTOR_UPSTREAM_URL`,
 * `COMPACTOR_WINDOW` → `COMPACTOR_CONTEXT_WINDOW`; on a tie the one listed
 * first, the more common), by letters only when no word is shared (a typo).
 */
export function unknownEnvironmentVariables(env: Readonly<Record<string, string | undefined>>, known: readonly string[]): string[] {
  return Object.keys(env)
    .filter((name) => name.startsWith('COMPACTOR_') && !known.includes(name))
    .sort()
    .map((name) => `${name}: unknown environment variable (did you mean ${closestName(name, known)}?)`);
}

/** Words people write for the ones compactor's names use. */
const SYNONYMS: Readonly<Record<string, string>> = { CTX: 'CONTEXT', ADDRESS: 'URL', ADDR: 'URL', ENDPOINT: 'URL', BASE: 'UPSTREAM', SERVER: 'UPSTREAM', KEY: 'KEYS', TOKEN: 'KEY' };

function wordsOf(name: string): string[] {
  return name.replace(/^COMPACTOR_/, '').split('_').filter((word) => word !== '').map((word) => SYNONYMS[word] ?? word);
}

function closestName(name: string, candidates: readonly string[]): string {
  const words = wordsOf(name);
  let best: string | undefined;
  let bestShared = 0;
  for (const candidate of candidates) {
    const theirs = wordsOf(candidate);
    // KEY and KEYS are one word: API_KEY, AUTH_KEYS.
    const shared = words.filter((word) => theirs.some((their) => their === word || their === `${word}S` || `${their}S` === word)).length;
    if (shared > bestShared) [best, bestShared] = [candidate, shared];
  }
  return best ?? closestByLetters(name, candidates);
}

/** The candidate with the fewest single-character edits from `name` (the first on a tie). */
export function closestByLetters(name: string, candidates: readonly string[]): string {
  let best = candidates[0]!;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of candidates) {
    const distance = editDistance(name, candidate);
    if (distance < bestDistance) [best, bestDistance] = [candidate, distance];
  }
  return best;
}

export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}
