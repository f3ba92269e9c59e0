import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Upstream, UpstreamResponse } from '../../upstream/client.js';
import { discardBody } from '../../upstream/body.js';
import { failureReason } from '../../upstream/failure.js';
import { InvalidRequestError } from '../../errors.js';
import { forwardRequestHeaders, forwardResponseHeaders } from './headers.js';
import { ExchangeAbort } from '../../upstream/exchange-abort.js';
import { onClientGone, relay } from '../exchange/relay.js';
import { targetPath } from './request-record.js';
import { resolveDotSegments } from './request-target.js';
import type { Shutdown } from '../ops/shutdown.js';

/**
 * Everything that is not compactor's own (`/v1/models`, `/props`, `/health`,
 * `/tokenize`, `/v1/embeddings`, any method): streamed through both ways,
 * untouched except for hop-by-hop headers and, when configured, the upstream
 * key.
 */

export interface PassthroughRouteOptions {
  readonly upstream: Upstream;
  /** Ends the requests still in flight (shutdown): their connections are cut. */
  readonly shutdown?: Shutdown;
}

function hasBody(request: FastifyRequest): boolean {
  const length = request.headers['content-length'];
  return request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

export async function passThrough(request: FastifyRequest, reply: FastifyReply, options: PassthroughRouteOptions): Promise<void> {
  const { upstream, shutdown } = options;
  // Resolved here, since the upstream client puts its base path in front: `/../admin` must not become `/llama/../admin`.
  const path = resolveDotSegments(targetPath(request.url));
  if (path === null) {
    throw new InvalidRequestError({ code: 'invalid_path', message: 'the request path climbs above its root with ".." segments' });
  }
  const state = request.record;
  const response = reply.raw;
  const abort = new ExchangeAbort();
  // At a shutdown, any answer of any server may pass here: none can be ended in its own terms, so its connection
  // is cut (a body cut short never passes for a whole one), which aborts the upstream request as a client leaving does.
  const cut = { end: () => response.destroy() };
  shutdown?.onEnd(cut);
  onClientGone(response, () => abort.abort(), shutdown === undefined ? undefined : () => shutdown.forget(cut));

  const started = performance.now();
  let answer: UpstreamResponse;
  try {
    answer = await upstream.forward({
      method: request.method,
      path,
      headers: forwardRequestHeaders(request.headers, { apiKey: upstream.apiKey, keepContentLength: true }),
      // The body was left unread by the content-type parser: it streams on as it arrives.
      body: hasBody(request) ? request.raw : null,
      signal: abort.emitter,
    });
  } catch (error) {
    state.upstreamMs = performance.now() - started;
    if (abort.aborted) {
      state.errorCode = 'client_closed';
      reply.hijack();
      return;
    }
    throw error;
  }
  state.upstreamMs = performance.now() - started;

  reply.hijack();
  response.writeHead(answer.status, forwardResponseHeaders(answer.headers));
  response.flushHeaders();
  const end = await relay(answer.body, response);
  state.bytes += end.bytes;
  switch (end.kind) {
    case 'ended':
      response.end();
      return;
    case 'client-closed':
      abort.abort();
      discardBody(answer.body);
      state.errorCode = 'client_closed';
      return;
    case 'failed':
      // Cut the client's connection too: a truncated body must not look complete.
      request.log.debug({ reason: failureReason(end.error) }, 'upstream response broke off');
      state.errorCode = 'upstream_stream_failed';
      response.destroy();
      return;
  }
}
