import type { IncomingHttpHeaders } from 'node:http';
import type { Config } from '../../config/schema.js';
import { InvalidRequestError } from '../../errors.js';

/**
 * A request may choose its own mode with `x-compactor-mode: off | observe |
 * compact`, for that request only (a client that keeps its own history for
 * one call, a test against the raw upstream). It may only lower the
 * operator's mode (compact → observe → off) unless
 * `compaction.allow_request_mode: raise`: one header lifted an operator's
 * observe ("no summary is ever asked for") into summary calls and a
 * rewritten history (issue 34 item 3). `never` ignores it. `off` forwards the
 * request as it was sent: pairs untouched, nothing planned. The header is
 * compactor's own and never forwarded (headers.ts).
 */

export type RequestMode = 'off' | 'observe' | 'compact';

export const REQUEST_MODE_HEADER = 'x-compactor-mode';

/** From the least done to the most: a request may move down this list, not up (unless `raise`). */
const MODES: readonly RequestMode[] = ['off', 'observe', 'compact'];

export interface ModeChoice {
  readonly mode: RequestMode;
  /** What `x-compactor` says of the choice, first: `mode off (x-compactor-mode)`, or why the header was ignored. */
  readonly note: string | undefined;
}

/** The request's mode: the header's when it names one and may, else the configuration's. */
export function requestModeOf(headers: IncomingHttpHeaders, config: Config): ModeChoice {
  const { mode: configured, enabled, allow_request_mode: allow } = config.compaction;
  const value = headers[REQUEST_MODE_HEADER];
  if (value === undefined) return { mode: configured, note: undefined };
  const asked = (Array.isArray(value) ? value.join(',') : value).trim().toLowerCase();
  if (allow === 'never') return { mode: configured, note: `${REQUEST_MODE_HEADER} ignored (compaction.allow_request_mode: never)` };
  if (!(MODES as readonly string[]).includes(asked)) {
    throw new InvalidRequestError({
      code: 'invalid_header',
      message: `${REQUEST_MODE_HEADER}: expected off, observe or compact, got ${JSON.stringify(asked.slice(0, 40))}`,
      param: REQUEST_MODE_HEADER,
    });
  }
  const wanted = asked as RequestMode;
  // With compaction off nothing compacts whatever is asked (the engine plans nothing): saying `mode compact` would be a lie.
  if (!enabled && wanted === 'compact') return { mode: configured, note: `${REQUEST_MODE_HEADER} compact ignored (compaction.enabled: false)` };
  if (allow === 'lower' && MODES.indexOf(wanted) > MODES.indexOf(configured)) {
    return { mode: configured, note: `${REQUEST_MODE_HEADER} ${wanted} ignored (may only lower mode ${configured}; compaction.allow_request_mode: raise lets it raise)` };
  }
  return { mode: wanted, note: `mode ${wanted} (${REQUEST_MODE_HEADER})` };
}
