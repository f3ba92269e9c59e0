import type { PairMode, ReadRequest, WireFormat } from '../../formats/registry.js';

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

export interface ReadSettings {
  readonly format: WireFormat;
  /** `pairs:` in the configuration. */
  readonly pairs: PairMode;
  readonly observing: boolean;
}

export function readExchange(settings: ReadSettings, body: unknown, contentType: string | undefined): ExchangeRead {
  const { format, pairs, observing } = settings;
  return { request: format.read(body, contentType, pairs, observing), raw: body as Buffer, observing };
}
