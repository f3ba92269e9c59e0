import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { receiveBodies } from '../edge/body-receiver.js';
import { runChatExchange } from '../exchange/exchange.js';
import { countTokens } from '../exchange/count-tokens.js';
import { ChatRoute, type ChatRouteOptions } from '../exchange/route.js';
import type { WireFormat } from '../../formats/registry.js';

/**
 * `POST /v1/chat/completions` (and `/chat/completions`): registration only.
 * Each request is one exchange (src/http/exchange/exchange.ts): read once,
 * pairs, the planner, forward, and the answer relayed back byte for byte
 * (src/http/exchange/relay-stream.ts for a streamed one). The Messages and
 * Responses APIs are the same exchange through their wire format.
 */

export type { ChatRouteOptions } from '../exchange/route.js';

export interface ChatRoutesOptions extends Omit<ChatRouteOptions, 'format'> {
  /** The wire formats served, one route each: the registry's (src/formats/registry.ts). */
  readonly formats: readonly WireFormat[];
  /** Answers a request that asks for a compaction rather than an answer (a Responses `compaction_trigger`, issue 38): compactor's, never forwarded. */
  readonly answerCompaction?: (request: FastifyRequest, reply: FastifyReply) => Promise<void>;
}

export async function chatRoutes(app: FastifyInstance, options: ChatRoutesOptions): Promise<void> {
  const bodyLimit = options.config.limits.body_bytes;
  // Every content type is read as bytes, up to the limit (413 beyond), a large body scanned as it arrives
  // (body-receiver.ts): the handler keeps the raw bytes and answers 415 itself, in OpenAI's shape.
  receiveBodies(app, { bodyBytes: bodyLimit, bounds: { maxItems: options.config.limits.max_items, maxValues: options.config.limits.max_values } });
  // One route per wire format (src/formats/registry.ts), each the same exchange through its format.
  for (const format of options.formats) {
    const route = new ChatRoute({ ...options, format });
    const { answerCompaction } = options;
    const handler = (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
      if (answerCompaction !== undefined && format.asksCompaction?.(request.body, request.headers['content-type']) === true) {
        request.record.kind = 'compact';
        return answerCompaction(request, reply);
      }
      request.record.kind = 'chat';
      return runChatExchange(request, reply, route);
    };
    for (const url of format.urls) app.post(url, { bodyLimit, config: { kind: 'chat', listKey: format.listKey } }, handler);
    // Its token count, where its API has one: with context edits it says what they leave (count-tokens.ts).
    for (const url of format.countTokensUrls ?? []) app.post(url, { bodyLimit, config: { kind: 'passthrough' } }, (request, reply) => countTokens(request, reply, route));
  }
}
