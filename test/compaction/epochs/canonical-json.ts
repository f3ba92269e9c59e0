/**
 * The oracle canonicalText is checked against: JSON with sorted keys (what
 * the chain hashed as compactor/1). Only tests use it, so it lives here.
 */

/** JSON with object keys sorted at every depth: a text of a value that key order never changes. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record).filter((key) => record[key] !== undefined).sort();
  return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(record[key])}`).join(',')}}`;
}
