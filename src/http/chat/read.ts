import type { ReadRequest } from '../../formats/registry.js';
import type { ChatRoute } from './route.js';

/**
 * The first step of a chat exchange, pure: the client's bytes read once by
 * the route's wire format (parse, validate, tool-call pairs) into the chat
 * view the planner works on. `/v1/compact` reads its body the same way.
 */

export interface ExchangeRead {
  readonly request: ReadRequest;
  /** The bytes the client sent; forwarded as they are when nothing changes the body. */
  readonly raw: Buffer;
  /** Observe mode forwards exactly what the client sent: pairs are checked and reported, never repaired or refused. */
  readonly observing: boolean;
}

export function readExchange(route: ChatRoute, body: unknown, contentType: string | undefined): ExchangeRead {
  const { config } = route.options;
  const observing = config.compaction.mode === 'observe';
  return { request: route.format.read(body, contentType, config.pairs, observing), raw: body as Buffer, observing };
}
