import type { UpstreamResponse } from '../../upstream/client.js';
import type { WallTimes } from '../../upstream/server-speeds.js';
import type { Timings, Usage } from '../../upstream/usage.js';
import type { Forwarded } from './ask-planner.js';
import type { ChatContext, UsageHook } from './planner.js';

/**
 * After a 2xx answer reached the client: its `usage` / `timings` go to the
 * planner's hook for this request (the engine learns its token ratio there)
 * and then the app's (metrics). Deferred with `setImmediate`, so nothing
 * here delays the answer; the hooks are called in turn, never combined into
 * a closure per request.
 */

/** Where the usage figures come from once the answer ended: the SSE tap, or a JSON answer's copy. */
export interface UsageSource {
  /** Reads the figures (a JSON answer is parsed here, after the client has it). */
  usageFound(): { readonly usage?: Usage | undefined; readonly timings?: Timings | undefined };
}

export interface UsageReport {
  /** What was sent upstream: its planner's hook, if it gave one, is called first. */
  readonly forwarded: Forwarded;
  /** The app's hook, for every request. */
  readonly appUsage: UsageHook | undefined;
  readonly status: UpstreamResponse['status'];
  readonly streamed: boolean;
  readonly source: UsageSource | undefined;
  /** A streamed answer's wall times. */
  readonly wall?: WallTimes;
  readonly log: ChatContext['log'];
}

/** The server's own account of an answer (llama-server's `timings`), for the log line; null when it gave none. */
export function serverTimesOf(timings: Timings | undefined): { prefillMs: number; decodeMs: number } | null {
  if (timings?.prompt_ms === undefined && timings?.predicted_ms === undefined) return null;
  return { prefillMs: timings.prompt_ms ?? 0, decodeMs: timings.predicted_ms ?? 0 };
}

export function hasUsageHooks(forwarded: Forwarded, appUsage: UsageHook | undefined): boolean {
  return forwarded.onUsage !== undefined || appUsage !== undefined;
}

/** Calls the hooks on the next turn of the event loop. */
export function reportUsageLater(report: UsageReport): void {
  setImmediate(reportUsage, report);
}

function reportUsage(report: UsageReport): void {
  const { forwarded } = report;
  try {
    const found = report.source?.usageFound() ?? {};
    const observation = {
      request: forwarded.figures,
      forwardedBytes: forwarded.forwardedBytes,
      report: forwarded.report,
      clientTokens: forwarded.clientTokens,
      status: report.status,
      streamed: report.streamed,
      usage: found.usage,
      timings: found.timings,
      wall: report.wall,
    };
    forwarded.onUsage?.(observation);
    report.appUsage?.(observation);
  } catch (error) {
    report.log.warn({ err: error }, 'usage hook failed');
  }
}
