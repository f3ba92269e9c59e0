/**
 * The path of a request target with its dot segments resolved (RFC 3986
 * § 5.2.4), or null when `..` segments climb above its root.
 *
 * The upstream client puts the configured base path in front of what is
 * forwarded (`upstream.url` `http://host/llama` and `/v1/models` make
 * `/llama/v1/models`), so a path that climbs above its root would leave the
 * base (`/../admin` → `/llama/../admin` = `/admin`) on whatever server sits
 * there. Such a path is refused rather than clamped: servers disagree about
 * it (llama-server clamps, nginx answers 400), and no client has a reason to
 * send one.
 *
 * Servers also disagree about what a segment is: `%2e` is `.` to most
 * (RFC 3986 § 2.3), some decode `%2f` and `%5c` into separators, take `\`
 * for `/`, merge `//`, or ignore a `;parameter` (`..;`). A path is refused
 * when it climbs above its root under either reading, the raw one or the
 * decoded one.
 */

const DOT = /^(?:\.|%2e)$/i;
const DOT_DOT = /^(?:\.|%2e){2}$/i;
const DECODED_SEPARATOR = /%2f|%5c|\\/i;

type Step = 'stay' | 'up' | 'down';

function stepOf(segment: string): Step {
  if (segment === '' || DOT.test(segment)) return 'stay';
  return DOT_DOT.test(segment) ? 'up' : 'down';
}

/** Whether walking `segments` from the root ever goes above it. */
function climbsAboveRoot(segments: readonly string[]): boolean {
  let depth = 0;
  for (const segment of segments) {
    const step = stepOf(segment);
    if (step === 'up' && --depth < 0) return true;
    if (step === 'down') depth++;
  }
  return false;
}

/**
 * @example
 * resolveDotSegments('/v1/./x/../models?q=..') // → '/v1/models?q=..'
 * resolveDotSegments('/v1/../../admin')       // → null
 */
export function resolveDotSegments(target: string): string | null {
  const queryStart = target.indexOf('?');
  const path = queryStart === -1 ? target : target.slice(0, queryStart);
  const query = queryStart === -1 ? '' : target.slice(queryStart);
  if (!path.startsWith('/')) return target;
  const segments = path.slice(1).split('/');
  const decoded = segments.flatMap((segment) => segment.split(DECODED_SEPARATOR)).map((segment) => segment.replace(/;.*$/, ''));
  if (climbsAboveRoot(segments) || climbsAboveRoot(decoded)) return null;

  const kept: string[] = [];
  segments.forEach((segment, index) => {
    const last = index === segments.length - 1;
    const step = segment === '' ? 'down' : stepOf(segment);
    if (step === 'up') kept.pop();
    if (step === 'down') kept.push(segment);
    // `/a/b/..` is `/a/`: a dot segment at the end leaves the directory it names.
    else if (last) kept.push('');
  });
  return `/${kept.join('/')}${query}`;
}
