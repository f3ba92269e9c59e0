import type { IncomingHttpHeaders } from 'node:http';
import { tenantOf } from '../../compaction/epochs/prefix-hash.js';

/**
 * The one tenant function (issues 33 and 35): every key that must never
 * cross tenants is made with it: epochs and learned ratios, the home slot
 * of a conversation (src/slots/conversation-key.ts), dashboard notes, the
 * summary queue's fairness and `/v1/compact`. Computed two ways before (the
 * key check's tenant, `keyTenant`, for slots; this for epochs), two credentials without
 * `auth.keys` shared one home slot, and suffix summaries ran on another
 * slot than their conversation.
 */

/** What the tenant is made from: the tenant the key check found (`''` without `auth.keys`), and the request's headers. */
export interface TenantSource {
  readonly keyTenant: string;
  readonly headers: IncomingHttpHeaders;
}

/**
 * Who is asking: the tenant the key check found, else a hash of the client's
 * whole credential, any scheme (a proxy without `auth.keys` still never
 * shares a summary between two credentials), else a tenant of its own for
 * clients that send none.
 */
export function tenantOfRequest(context: TenantSource): string {
  if (context.keyTenant !== '') return context.keyTenant;
  const authorization = joined(context.headers.authorization);
  const apiKey = joined(context.headers['x-api-key']);
  // The planner and the dashboard both ask, and one client sends the same credential request after request:
  // the last credential's digest is kept, so a request hashes it once at most, most requests not at all.
  if (authorization !== lastCredential.authorization || apiKey !== lastCredential.apiKey) {
    lastCredential = { authorization, apiKey, tenant: tenantOf({ authorization, apiKey }) };
  }
  return lastCredential.tenant;
}

let lastCredential: { readonly authorization: string | undefined; readonly apiKey: string | undefined; readonly tenant: string } = {
  authorization: undefined,
  apiKey: undefined,
  tenant: tenantOf({}),
};

function joined(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join('\n') : value;
}
