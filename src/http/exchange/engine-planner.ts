import type { IncomingHttpHeaders } from 'node:http';
import { editedAnswer } from '../../compaction/policy/applied-edits.js';
import type { ContextEdits } from '../../transcript/context-edits.js';
import type { ChatContext, ChatPlan, ChatPlanner, RefusalHook, UsageHook, UsageObservation } from './planner.js';
import type { Upstream } from '../../upstream/client.js';
import type { Compacted, CompactionEngine, CompactionInput } from '../../compaction/engine/engine.js';
import { tenantOfRequest } from '../edge/tenant.js';
import type { CallHeaders } from '../../compaction/ports.js';
import { type WireFormat, chatRequestView } from '../../formats/registry.js';
import type { RequestView } from '../../transcript/request-view.js';

/**
 * The seam between the chat route and the compaction engine: the route's
 * planner asks the engine what to forward, and its usage hook teaches the
 * engine the real token counts and starts background epochs.
 */

/** How often a streamed request waiting for a summary is told it still waits: well inside proxies' idle timeouts. */
const PROGRESS_REPEAT_MS = 5_000;

/**
 * The client's credential, forwarded with compactor's own upstream calls
 * when no upstream key replaces it: from the first of its format's
 * credential headers it sent. Those calls go through chat completions, so a
 * bare key (Anthropic's `x-api-key`) goes as a bearer token.
 */
export function credentialHeaders(headers: IncomingHttpHeaders, format: Pick<WireFormat, 'credentialHeaders'>, upstream: Upstream): CallHeaders | undefined {
  if (upstream.apiKey !== null) return undefined;
  for (const name of format.credentialHeaders) {
    const value = headers[name];
    if (typeof value === 'string') return { authorization: name === 'authorization' ? value : `Bearer ${value}` };
  }
  return undefined;
}

/**
 * A request as the engine sees it. Its signal (the context's) and its tenant
 * (a hash of the client's key) are made only when the engine reads them, on
 * the paths past the fast one, which most requests never take.
 */
class EngineRequest implements CompactionInput {
  readonly request: RequestView;
  readonly onProgress: (line: string) => void;
  readonly upstreamHeaders: CallHeaders | undefined;
  readonly mode: 'compact' | 'observe';
  readonly edits: ContextEdits | undefined;
  readonly #context: ChatContext;
  #tenant: string | undefined;

  constructor(context: ChatContext, onProgress: (line: string) => void, upstreamHeaders: CallHeaders | undefined, mode: 'compact' | 'observe') {
    this.request = chatRequestView(context.body, context.maxOutputTokens);
    this.mode = mode;
    this.onProgress = onProgress;
    this.upstreamHeaders = upstreamHeaders;
    this.#context = context;
    this.edits = context.edits;
  }

  get signal(): AbortSignal {
    return this.#context.signal;
  }

  /** Read while planning only: the request keeps no reference to the client's bytes, which are let go of once forwarded. */
  get sourceBytes(): Buffer | undefined {
    return this.#context.sourceBytes;
  }

  get tenant(): string {
    this.#tenant ??= tenantOfRequest(this.#context);
    return this.#tenant;
  }
}

/**
 * The answer's real prompt size teaches the engine its token ratio; then background work may start.
 * Made outside the planner: a closure there would share its scope, which holds the request's context
 * and so the parsed body, until the answer ends.
 */
function usageHookOf(compactor: CompactionEngine, model: string, tenant: string, result: Compacted): UsageHook {
  const { estimate, afterResponse } = result;
  return ({ usage, timings }: UsageObservation): void => {
    const promptTokens = usage?.prompt_tokens ?? (timings?.prompt_n !== undefined ? timings.prompt_n + (timings.cache_n ?? 0) : undefined);
    if (promptTokens !== undefined) compactor.learn(model, tenant, promptTokens, estimate);
    afterResponse?.();
  };
}

export function compactionHooks(
  compactor: CompactionEngine,
  upstream: Upstream,
  mode: 'compact' | 'observe' = 'compact',
): { readonly planner: ChatPlanner; readonly onRefusal: RefusalHook } {
  const planner = async (context: ChatContext): Promise<ChatPlan> => {
    let lastLine: string | null = null;
    let ticker: NodeJS.Timeout | undefined;
    const onProgress = (line: string): void => {
      lastLine = line;
      context.progress(line);
      ticker ??= setInterval(() => {
        if (lastLine !== null) context.progress(lastLine);
      }, PROGRESS_REPEAT_MS);
    };
    let result: Compacted;
    const request = new EngineRequest(context, onProgress, credentialHeaders(context.headers, context.format, upstream), context.mode === 'observe' ? 'observe' : context.mode === 'compact' ? 'compact' : mode);
    try {
      result = await compactor.compact(request);
    } finally {
      clearInterval(ticker);
    }
    const onUsage = usageHookOf(compactor, context.body.model, request.tenant, result);
    const report = result.report === null ? {} : { report: result.report, ...(result.clientTokens === undefined ? {} : { clientTokens: result.clientTokens }) };
    // Observe mode only says what would be done: the edits too.
    if (request.edits !== undefined && request.mode === 'compact') {
      const ratio = compactor.ratios.get(context.body.model, request.tenant);
      const writtenNow = result.epoch === 'new' && (result.tier === 'summary' || result.tier === 'steps');
      const edited = editedAnswer(request.edits, request.request.messages, result.messages, ratio, { notes: result.notes, writtenNow });
      const answerEdits = { answerEdits: edited.answer };
      if (edited.messages === request.request.messages) return { ...report, onUsage, ...answerEdits };
      return { body: { ...context.body, messages: edited.messages }, ...report, onUsage, ...answerEdits };
    }
    if (!result.changed) return { ...report, onUsage };
    return { body: { ...context.body, messages: result.messages }, ...report, onUsage };
  };

  // A window configured too large, or a server restarted with a smaller -c: the refusal says the real one.
  const onRefusal = async (context: ChatContext, window: number): Promise<boolean> => {
    // A request forwarded as sent (observe, off) would be sent again unchanged: the refusal is the client's answer.
    if ((context.mode ?? mode) !== 'compact') return false;
    const model = context.body.model;
    const headers = credentialHeaders(context.headers, context.format, upstream);
    const planned = await compactor.windows.get(model, headers);
    if (planned !== null && window >= planned) return false;
    return compactor.windows.learnRefusal(model, window, headers);
  };

  return { planner, onRefusal };
}
