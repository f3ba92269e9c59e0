import type { OutgoingHttpHeaders } from 'node:http';
import { discardBody } from '../../upstream/body.js';
import type { UpstreamResponse } from '../../upstream/client.js';
import { EVENT_STREAM, isJsonMediaType, mediaTypeOf } from '../../upstream/media-type.js';
import { isContextExceeded } from '../../upstream/refusal.js';
import { sseComment } from './sse-comment.js';
import { UpstreamBadResponseError, UpstreamStatusError } from '../../errors.js';
import { SSE_RESPONSE_HEADERS, forwardResponseHeaders, headerText, isContentEncoded } from '../edge/headers.js';
import { type AnswerWriter, trailersAllowed } from './answer.js';
import { relayStream } from './relay-stream.js';
import { MAX_ERROR_BODY_BYTES, parsedOrUndefined, readLimited } from './bounded-body.js';
import { relayJson, relayWholeJson } from './relay-json.js';
import type { Forwarded } from './ask-planner.js';
import type { ReadAhead } from './relay.js';
import { watchClientReads } from './client-reads.js';

/**
 * The second half of a chat exchange: the upstream's answer head, passed on
 * (status and headers, `x-compactor` with the report), then the body relayed
 * by relay-stream.ts (SSE) or relay-json.ts (JSON). A 2xx JSON answer is
 * read whole first, so its head's `x-compactor` also carries the server's
 * seconds; a stream's come at its end, in the `x-compactor` trailer its head
 * declares and a last SSE comment. After progress comments the head is gone:
 * an upstream error can then only reach the client as an SSE error event,
 * and the report as a comment.
 */

/** An `Access-Control-Expose-Headers` value with `name` added (once). */
function exposedWith(value: OutgoingHttpHeaders[string], name: string): string {
  const listed = value === undefined ? '' : Array.isArray(value) ? value.join(', ') : String(value);
  const names = listed.split(',').map((part) => part.trim()).filter((part) => part !== '');
  return names.some((part) => part.toLowerCase() === name || part === '*') ? names.join(', ') : [...names, name].join(', ');
}

/**
 * `ahead`: the answer is taken in ahead of the client (an exchange that holds
 * a llama-server slot gives it back when the upstream is done), and a client
 * that then reads nothing for `upstream.timeouts.idle_ms` is cut.
 */
export async function respond(writer: AnswerWriter, answer: UpstreamResponse, forwarded: Forwarded, ahead?: ReadAhead): Promise<void> {
  const { status, body } = answer;
  const mediaType = mediaTypeOf(answer.headers['content-type']);
  const streamed = mediaType === EVENT_STREAM;
  // compactor does not ask for compression (no Accept-Encoding), but an upstream may compress anyway. Such a body
  // is relayed as it came and never appended to: decoding it to read it would change the bytes the client gets
  // (it can decode them itself: Content-Encoding goes along) and cost CPU on every chunk, for what the tap gives,
  // which is the usage figures and the [DONE] guard. Without them, a failure cuts the client's connection instead.
  const encoded = isContentEncoded(answer.headers['content-encoding']);

  if (!streamed && !isJsonMediaType(mediaType)) {
    discardBody(body);
    throw new UpstreamBadResponseError({
      message: `the upstream server answered ${status} with ${mediaType === '' ? 'no content type' : mediaType} instead of JSON`,
    });
  }

  if (writer.early) {
    if (!streamed || status >= 300) {
      // Headers are gone: the upstream's error can only reach the client as an SSE error event.
      const text = await readLimited(body, MAX_ERROR_BODY_BYTES);
      const upstreamBody = parsedOrUndefined(text);
      if (isContextExceeded(upstreamBody)) writer.route.options.onContextExceeded?.(forwarded.figures.model);
      const error = status >= 300 ? new UpstreamStatusError({ status, body: upstreamBody }) : new UpstreamBadResponseError({ message: 'the upstream answered a streamed request with JSON' });
      writer.endWithError(error, '', forwarded.report);
      return;
    }
    if (encoded) {
      // The headers went out with the progress comments, uncompressed: compressed bytes cannot follow them.
      discardBody(body);
      throw new UpstreamBadResponseError({
        message: 'the upstream compressed its stream (Content-Encoding) though compactor did not ask it to, after progress comments went out uncompressed',
      });
    }
    // The report now; the trailer declared in the early head carries it with the server's seconds at the end.
    if (forwarded.report !== undefined) writer.write(sseComment(forwarded.report));
  } else {
    const outgoing: OutgoingHttpHeaders = forwardResponseHeaders(answer.headers);
    if (forwarded.report !== undefined) {
      outgoing['x-compactor'] = headerText(forwarded.report);
      // A browser client may read it (the upstream's own CORS headers pass through; this one is added to theirs).
      outgoing['access-control-expose-headers'] = exposedWith(outgoing['access-control-expose-headers'], 'x-compactor');
    }
    if (!streamed && status >= 200 && status < 300 && !encoded) {
      // A client that then reads none of it is cut as before (the watch sees no pending bytes until the head goes out).
      if (ahead !== undefined) watchClientReads(writer.response, writer.route.options.config.upstream.timeouts.idle_ms, () => writer.clientStalled());
      // Read whole before the head goes out, so x-compactor can say what the server spent on it (bounded: see relay-json.ts).
      await relayWholeJson(writer, answer, forwarded, outgoing, (line) => {
        outgoing['x-compactor'] = headerText(line);
        outgoing['access-control-expose-headers'] = exposedWith(outgoing['access-control-expose-headers'], 'x-compactor');
      });
      return;
    }
    if (streamed) {
      Object.assign(outgoing, SSE_RESPONSE_HEADERS);
      if (status >= 200 && status < 300 && !encoded && trailersAllowed(writer.response)) {
        // The server's seconds are known only at the stream's end: they come in this trailer (and a last SSE comment).
        // compactor appends to the stream, so the upstream's length (if it sent one) no longer holds, and a trailer needs chunks.
        delete outgoing['content-length'];
        outgoing['trailer'] = 'x-compactor';
        outgoing['access-control-expose-headers'] = exposedWith(outgoing['access-control-expose-headers'], 'x-compactor');
      }
    }
    writer.head(status, outgoing, streamed);
  }

  if (ahead !== undefined) watchClientReads(writer.response, writer.route.options.config.upstream.timeouts.idle_ms, () => writer.clientStalled());
  if (streamed) await relayStream(writer, answer, forwarded, encoded, ahead);
  else await relayJson(writer, answer, forwarded, encoded, ahead);
}
