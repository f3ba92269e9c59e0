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

/** One URL or a list of them (a cluster's seed nodes), passwords masked. */
export function maskUrls<T extends string | readonly string[] | null>(urls: T): T {
  if (urls === null || typeof urls === 'string') return maskUrl(urls as string | null) as T;
  return (urls as readonly string[]).map((url) => maskUrl(url)!) as unknown as T;
}
