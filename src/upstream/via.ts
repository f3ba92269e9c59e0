import { randomBytes } from 'node:crypto';

/**
 * compactor's mark in the `Via` header (RFC 9110 §7.6.3) of every request it
 * sends upstream, and how it recognises a request that already went through
 * this very process: an upstream URL pointing back at compactor (its own
 * port, or a chain that loops) made 33k requests and 665 MB in 11 s before;
 * the second pass now gets a 508. The name is random per process, so two
 * compactors chained on purpose still pass each other's requests, and long
 * enough (128 bits, shown to no client) that a client cannot forge a loop:
 * a `Via` carrying it is a loop whatever key the request carries.
 */

/** This process's pseudonym in `Via`. */
export const VIA_NAME = `compactor-${randomBytes(16).toString('hex')}`;

const OWN_ENTRY = `1.1 ${VIA_NAME}`;

/**
 * The `Via` value to send upstream: the client's, with this process added.
 *
 * @example
 * viaWithOwn(undefined)       // → '1.1 compactor-1a2b3c4d'
 * viaWithOwn('1.1 nginx')     // → '1.1 nginx, 1.1 compactor-1a2b3c4d'
 */
export function viaWithOwn(existing: string | string[] | undefined): string {
  if (existing === undefined || existing.length === 0) return OWN_ENTRY;
  return `${Array.isArray(existing) ? existing.join(', ') : existing}, ${OWN_ENTRY}`;
}

/** Whether a request's `Via` shows it already went through this process. */
export function cameThroughHere(via: string | string[] | undefined): boolean {
  if (via === undefined) return false;
  const text = Array.isArray(via) ? via.join(',') : via;
  return text.split(',').some((entry) => entry.trim().split(/\s+/)[1] === VIA_NAME);
}
