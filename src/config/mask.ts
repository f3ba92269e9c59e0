/** What stands for a secret wherever configuration is shown (`--print-config`, logs). */
export const MASK = '***';

/** A URL as it may be shown: its password masked. */
export function maskUrl(url: string | null): string | null {
  if (url === null) return null;
  const parsed = new URL(url);
  if (parsed.password === '') return url;
  parsed.password = MASK;
  return parsed.toString();
}
