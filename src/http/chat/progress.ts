import { sseComment } from '../../upstream/sse.js';
import { SSE_RESPONSE_HEADERS } from '../headers.js';
import type { ChatExchange } from './exchange.js';

/**
 * Progress comments: while a compaction makes a `stream: true` client wait,
 * compactor sends it SSE comments (`: compacting 84 messages`). The first
 * one commits status 200 and the SSE headers before the upstream answered;
 * from then on an error reaches the client as an SSE error event
 * (respond.ts) and the report as a last comment.
 */

/** Shared by every early answer: writeHead reads it, never changes it. */
const EARLY_HEADERS: Readonly<Record<string, string>> = { 'content-type': 'text/event-stream', ...SSE_RESPONSE_HEADERS };

/**
 * Sends `comment` (see `ChatContext.progress`). Returns false, doing nothing,
 * when the request is not streamed, `compaction.progress` is off, or the
 * exchange was aborted.
 */
export function sendProgress(exchange: ChatExchange, streamRequested: boolean, comment: string): boolean {
  if (!streamRequested || !exchange.route.options.config.compaction.progress || exchange.abort.aborted) return false;
  startEarly(exchange);
  exchange.write(sseComment(comment));
  return true;
}

function startEarly(exchange: ChatExchange): void {
  if (exchange.early) return;
  exchange.early = true;
  exchange.reply.hijack();
  exchange.response.writeHead(200, EARLY_HEADERS);
  exchange.response.flushHeaders();
  exchange.streamStarted();
}
