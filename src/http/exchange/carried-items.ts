import type { FastifyRequest } from 'fastify';
import { summaryPair } from '../../compaction/policy/replacement.js';
import { InvalidRequestError } from '../../errors.js';
import type { CarriedOpener, WireFormat } from '../../formats/registry.js';
import { tenantOfRequest } from '../edge/tenant.js';
import type { NotesSeal } from './sealed-notes.js';
import type { ChatRouteOptions } from './route.js';

/**
 * The items a client carries for the server, opened before a chat exchange
 * reads its body (issue 38 item 1): a Responses `compaction` item that
 * `/v1/responses/compact` sealed becomes the summary pair of its notes (the
 * replacement's usual shape) and the messages the summary kept raw after
 * them, and the same item always the same messages, so
 * the forwarded prefix stays byte-stable. One that does not open (altered,
 * OpenAI's own, another deployment's or tenant's) is a 400 in the format's
 * error shape, and nothing is forwarded. In every mode, observe and off
 * included: no upstream knows the item, so it is never sent as it came.
 */

/** The reason a compaction item did not open, for the client. */
function refusal(param: string, failure: 'foreign' | 'altered'): InvalidRequestError {
  const message =
    failure === 'foreign'
      ? `${param}: this compaction item was not made by this compactor (it can open only the items its own /v1/responses/compact answered); send the history it replaced, or compact it here again`
      : `${param}: this compaction item does not verify: it was altered, sealed with another key (compaction.seal_key; without one, by a compactor process since restarted), or for another credential; send the history it replaced, or compact it again`;
  return new InvalidRequestError({ code: 'invalid_body', message, param });
}

/** Opens compactor's sealed items for `tenant`; throws the 400 for one that does not open. */
export function carriedOpener(seal: NotesSeal, tenant: string): CarriedOpener {
  return (sealed, param) => {
    const unsealed = seal.open(sealed, tenant);
    if (!unsealed.ok) throw refusal(param, unsealed.failure);
    return [...summaryPair(unsealed.notes), ...unsealed.kept];
  };
}

/**
 * The request's body with the items it carries opened (`request.body`
 * replaced, so every later step reads the opened bytes); how many there were.
 */
export function openCarriedItems(request: FastifyRequest, format: WireFormat, options: Pick<ChatRouteOptions, 'seal' | 'onCarried'>): number {
  const body: unknown = request.body;
  const { seal, onCarried } = options;
  if (format.openCarried === undefined || seal === undefined || !Buffer.isBuffer(body)) return 0;
  const tenant = tenantOfRequest({ keyTenant: request.record.keyTenant, headers: request.headers });
  let opened: { raw: Buffer; opened: number };
  try {
    opened = format.openCarried(body, request.headers['content-type'], carriedOpener(seal, tenant));
  } catch (error) {
    onCarried?.('refused', 1);
    throw error;
  }
  if (opened.opened === 0) return 0;
  request.body = opened.raw;
  onCarried?.('opened', opened.opened);
  return opened.opened;
}

/** The words of the report for the items opened, or undefined for none. */
export function openedLine(opened: number): string | undefined {
  return opened === 0 ? undefined : `opened ${opened} compaction item${opened === 1 ? '' : 's'}`;
}
