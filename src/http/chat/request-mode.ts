import type { IncomingHttpHeaders } from 'node:http';
import type { Config } from '../../config/schema.js';
import { InvalidRequestError } from '../../errors.js';

/**
 * A request may choose its own mode with `x-compactor-mode: off | observe |
 * compact`, for that request only (a client that keeps its own history for
 * one call, a test against the raw upstream), unless
 * `compaction.allow_request_mode: false`. `off` forwards the request as it
 * was sent: pairs untouched, nothing planned.
 */

export type RequestMode = 'off' | 'observe' | 'compact';

export const REQUEST_MODE_HEADER = 'x-compactor-mode';

const MODES: readonly RequestMode[] = ['off', 'observe', 'compact'];

export interface ModeChoice {
  readonly mode: RequestMode;
  /** What `x-compactor` says of the choice, first: `mode off (x-compactor-mode)`, or that the header was ignored. */
  readonly note: string | undefined;
}

/** The request's mode: the header's when it names one and may, else the configuration's. */
export function requestModeOf(headers: IncomingHttpHeaders, config: Config): ModeChoice {
  const configured: RequestMode = config.compaction.mode;
  const value = headers[REQUEST_MODE_HEADER];
  if (value === undefined) return { mode: configured, note: undefined };
  const asked = (Array.isArray(value) ? value.join(',') : value).trim().toLowerCase();
  if (!config.compaction.allow_request_mode) return { mode: configured, note: `${REQUEST_MODE_HEADER} ignored (compaction.allow_request_mode: false)` };
  if (!(MODES as readonly string[]).includes(asked)) {
    throw new InvalidRequestError({
      code: 'invalid_header',
      message: `${REQUEST_MODE_HEADER}: expected off, observe or compact, got ${JSON.stringify(asked.slice(0, 40))}`,
      param: REQUEST_MODE_HEADER,
    });
  }
  return { mode: asked as RequestMode, note: `mode ${asked} (${REQUEST_MODE_HEADER})` };
}
