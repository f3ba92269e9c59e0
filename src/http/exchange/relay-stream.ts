import { failureReason, toUpstreamError } from '../../upstream/failure.js';
import type { UpstreamResponse } from '../../upstream/client.js';
import { SseTap } from '../../upstream/sse.js';
import { type ProxyError, UpstreamStreamError } from '../../errors.js';
import { type ReadAhead, relay } from './relay.js';
import type { AnswerWriter } from './answer.js';
import type { Forwarded } from './ask-planner.js';
import { hasUsageHooks, reportUsageLater, serverTimesOf } from './usage-hooks.js';

/**
 * How a streamed (SSE) answer is relayed: chunk by chunk as the upstream
 * writes it, byte for byte, through a tap (`SseTap`) that reads along
 * without holding the stream back. The tap gives what the relay needs to
 * end the answer honestly:
 *
 * - the usage figures, for the hooks (usage.ts);
 * - whether `[DONE]` came: a 2xx stream that ended without it gets
 *   compactor's error event (`upstream_stream_incomplete`), never a clean end;
 * - where an event was cut: an upstream that fails mid-stream gets its
 *   pending event closed (`closingBytes`) and an SSE error event after it
 *   (`upstream_stream_failed`, or `upstream_timeout` when it stalled);
 * - the upstream's own error event, so the log line and the metrics count
 *   the request with its status, not the 200 the stream began with;
 * - the server's `timings`: a whole stream ends with what the server spent
 *   on it (`server 0.42 s prefill, 1.10 s decode`) in a last SSE comment and
 *   the `x-compactor` trailer (answer.ts `finishStream`).
 *
 * A compressed stream (Content-Encoding the client asked nothing about) is
 * relayed untouched with no tap: there is nothing to read in it, and a
 * failure then cuts the client's connection.
 */

const INCOMPLETE_STREAM = new UpstreamStreamError({ incomplete: true });

// The code an upstream error event is logged with: what UpstreamStatusError names an upstream's error answer.
const UPSTREAM_ERROR_EVENT = 'upstream_error';

/** A failure after the answer began: the stream broke off or stalled. */
export function midStreamError(error: Error): ProxyError {
  const mapped = toUpstreamError(error);
  if (mapped.code === 'upstream_timeout') return mapped;
  return new UpstreamStreamError({ incomplete: false, reason: failureReason(error) });
}

/** Relays a streamed answer whose head (or early head) already went out. */
export async function relayStream(writer: AnswerWriter, answer: UpstreamResponse, forwarded: Forwarded, encoded: boolean, ahead?: ReadAhead): Promise<void> {
  const { status, body } = answer;
  const record = writer.record;
  const response = writer.response;
  const succeeded = status >= 200 && status < 300;
  const collectUsage = succeeded && hasUsageHooks(forwarded, writer.route.options.hooks.onUsage);
  // Compressed bytes are not text: there is nothing for a tap to read in them.
  const tap = encoded ? undefined : new SseTap(writer.route.format, { collectUsage });

  const relayStarted = performance.now();
  const end = await relay(body, response, tap, ahead);
  record.bytes += end.bytes;
  switch (end.kind) {
    case 'client-closed':
      writer.relayLeft(body);
      return;
    case 'failed': {
      const error = writer.endedBy ?? midStreamError(end.error);
      if (tap === undefined) {
        writer.cutWithError(error);
        return;
      }
      writer.endWithError(error, tap.closingBytes(), forwarded.report);
      return;
    }
    case 'ended':
      break;
  }

  if (tap !== undefined && succeeded && !tap.sawDone && !tap.sawError) {
    writer.endWithError(INCOMPLETE_STREAM, tap.closingBytes(), forwarded.report);
    return;
  }
  record.server = serverTimesOf(tap?.timings);
  // The comment only where the stream ended at an event boundary: anywhere else it would join the last event.
  writer.finishStream(forwarded.report, record.server, tap !== undefined && tap.closingBytes() === '');
  const errorStatus = tap?.errorStatus ?? null;
  if (errorStatus !== null && succeeded) {
    // The upstream's own `data: {"error":…}` already told the client; the log and the metrics say so too.
    record.errorCode = UPSTREAM_ERROR_EVENT;
    record.errorStatus = errorStatus;
  }
  if (collectUsage) {
    const wall = { firstByteMs: record.upstreamMs ?? 0, restMs: performance.now() - relayStarted };
    reportUsageLater({ forwarded, appUsage: writer.route.options.hooks.onUsage, status, streamed: true, source: tap, wall, log: writer.request.log });
  }
}
