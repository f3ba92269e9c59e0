import type { Config } from './schema.js';
import { maskUrl } from './mask.js';

/** `/v1` at the end of a base path, as other gateways' configurations write the upstream. */
const API_SUFFIX = /\/v1\/?$/;

/**
 * Upstream URLs without a trailing `/v1`: compactor forwards the client's
 * whole path (`/v1/chat/completions`), so a base URL ending in `/v1`, the
 * habit of other gateways' configurations, made every request
 * `/v1/v1/chat/completions`, a 404 with nothing in the log. It is taken off,
 * and said at start.
 */
export function withoutApiSuffix(config: Config): { config: Config; notices: string[] } {
  const notices: string[] = [];
  const strip = (key: string, url: string): string => {
    const parsed = new URL(url);
    if (!API_SUFFIX.test(parsed.pathname)) return url;
    parsed.pathname = parsed.pathname.replace(API_SUFFIX, '') || '/';
    const fixed = parsed.toString().replace(/\/$/, '');
    notices.push(`${key} ends in /v1, but clients' paths already start with /v1: forwarding to ${maskUrl(fixed)!} instead (write it so to silence this)`);
    return fixed;
  };
  const url = strip('upstream.url', config.upstream.url);
  const summaryUpstream = config.compaction.summary.upstream;
  const summary = summaryUpstream === null ? null : strip('compaction.summary.upstream', summaryUpstream);
  if (notices.length === 0) return { config, notices };
  return {
    config: { ...config, upstream: { ...config.upstream, url }, compaction: { ...config.compaction, summary: { ...config.compaction.summary, upstream: summary } } },
    notices,
  };
}
