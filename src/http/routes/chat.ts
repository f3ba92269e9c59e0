import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ChatExchange, ChatRoute, type ChatRouteOptions } from '../chat/exchange.js';
import { MESSAGES_FORMAT, RESPONSES_FORMAT } from '../chat/wire-format.js';

/**
 * `POST /v1/chat/completions` (and `/chat/completions`): registration only.
 * Each request is one `ChatExchange` (src/http/chat/exchange.ts): read once,
 * pairs, the planner, forward, and the answer relayed back byte for byte
 * (src/http/chat/relay-stream.ts for a streamed one).
 */

export type { ChatRouteOptions } from '../chat/exchange.js';

export async function chatRoutes(app: FastifyInstance, options: ChatRouteOptions): Promise<void> {
  const bodyLimit = options.config.limits.body_bytes;
  const route = new ChatRoute(options);
  // Every content type is read as bytes, up to the limit (413 beyond): the
  // handler keeps the raw bytes and answers 415 itself, in OpenAI's shape.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit }, (_request, body, done) => {
    done(null, body);
  });
  const handler = (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    request.record.kind = 'chat';
    return new ChatExchange(request, reply, route).run();
  };
  for (const url of ['/v1/chat/completions', '/chat/completions']) {
    app.post(url, { bodyLimit, config: { kind: 'chat' } }, handler);
  }
  // The Anthropic Messages API (Claude Code): the same exchange through its adapter (src/formats/messages.ts).
  // The OpenAI Responses API (Codex CLI): the same, through src/formats/responses.ts.
  for (const [url, format] of [['/v1/messages', MESSAGES_FORMAT], ['/v1/responses', RESPONSES_FORMAT]] as const) {
    const formatRoute = new ChatRoute({ ...options, format });
    app.post(url, { bodyLimit, config: { kind: 'chat' } }, (request, reply) => {
      request.record.kind = 'chat';
      return new ChatExchange(request, reply, formatRoute).run();
    });
  }
}
