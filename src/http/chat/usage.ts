import type { UpstreamResponse } from '../../upstream/client.js';
import type { Timings, Usage } from '../../upstream/usage.js';
import type { ChatContext, UsageHook } from './planner.js';

/**
 * After a 2xx answer reached the client: its `usage` / `timings` go to the
 * planner's hook for this request (the engine learns its token ratio there)
 * and then the app's (metrics). Deferred with `setImmediate`, so nothing
 * here delays the answer; the hooks are called in turn, never combined into
 * a closure per request.
 */

/** What was sent upstream, kept for the usage hooks. */
export interface Sent {
  readonly context: ChatContext;
  readonly forwarded: Readonly<Record<string, unknown>>;
  readonly forwardedBytes: number;
  readonly report: string | undefined;
  readonly clientTokens: number | undefined;
  /** The planner's hook for this request, when it gave one. */
  readonly planUsage: UsageHook | undefined;
  /** The app's hook, for every request. */
  readonly appUsage: UsageHook | undefined;
}

/** Where the usage figures come from once the answer ended: the SSE tap, or a JSON answer's copy. */
export interface UsageSource {
  /** Reads the figures (a JSON answer is parsed here, after the client has it). */
  usageFound(): { readonly usage?: Usage | undefined; readonly timings?: Timings | undefined };
}

export interface UsageReport {
  readonly sent: Sent;
  readonly status: UpstreamResponse['status'];
  readonly streamed: boolean;
  readonly source: UsageSource | undefined;
  readonly log: ChatContext['log'];
}

export function hasUsageHooks(sent: Sent): boolean {
  return sent.planUsage !== undefined || sent.appUsage !== undefined;
}

/** Calls the hooks on the next turn of the event loop. */
export function reportUsageLater(report: UsageReport): void {
  setImmediate(reportUsage, report);
}

function reportUsage(report: UsageReport): void {
  const { sent } = report;
  try {
    const found = report.source?.usageFound() ?? {};
    const observation = {
      context: sent.context,
      forwarded: sent.forwarded,
      forwardedBytes: sent.forwardedBytes,
      report: sent.report,
      clientTokens: sent.clientTokens,
      status: report.status,
      streamed: report.streamed,
      usage: found.usage,
      timings: found.timings,
    };
    sent.planUsage?.(observation);
    sent.appUsage?.(observation);
  } catch (error) {
    report.log.warn({ err: error }, 'usage hook failed');
  }
}
