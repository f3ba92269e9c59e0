import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * Client authentication against `auth.keys`. Keys and the presented token
 * are compared as SHA-256 digests with `timingSafeEqual`, and every key is
 * compared, so the time taken tells nothing about how much of a key matched
 * or which one did.
 */

export type KeyCheck = (authorization: string | undefined) => { readonly ok: true; readonly tenant: string } | { readonly ok: false };

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/** The Bearer token of an `Authorization` header, or undefined. */
export function bearerToken(authorization: string | undefined): string | undefined {
  if (authorization === undefined) return undefined;
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization);
  return match?.[1];
}

/**
 * @example
 * const check = createKeyCheck(['sk-one']);
 * check('Bearer sk-one') // → { ok: true, tenant: '…16 hex digits…' }
 * check('Bearer nope')   // → { ok: false }
 */
export function createKeyCheck(keys: readonly string[]): KeyCheck {
  const digests = keys.map(digest);
  return (authorization) => {
    const token = bearerToken(authorization);
    // An absent token is still compared (against a digest of nothing) to keep the timing flat.
    const presented = digest(token ?? '');
    let matched = -1;
    for (let index = 0; index < digests.length; index++) {
      if (timingSafeEqual(presented, digests[index]!) && token !== undefined) matched = index;
    }
    if (matched === -1) return { ok: false };
    return { ok: true, tenant: digests[matched]!.toString('hex').slice(0, 16) };
  };
}
