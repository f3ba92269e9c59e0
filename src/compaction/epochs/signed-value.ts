import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The small values a shared store holds besides epochs (a ratio's measures, a
 * back-off's end), signed when `cache.redis.secret` is set (issue 34 item
 * 4): unsigned, a ratio of 4 written beside signed epochs made a fresh
 * replica summarize a 2.3k-token history on an 8k window. A signed value is
 * `s1:<HMAC-SHA256, base64url>:<text>`, the HMAC over the key's whole name
 * and the text, so a value copied under another key (another tenant's ratio,
 * another conversation's back-off) does not verify either. Without a secret a
 * value is its text, and the store is trusted with it (a back-off still
 * holds a summary back one minute at most, a ratio stays within its range).
 */

const SIGNED = 's1:';
const MAC_CHARACTERS = 43;

export type Opened = { readonly text: string } | { readonly bad: 'unsigned' | 'signature'; readonly detail: string };

export class ValueSigner {
  readonly #secret: string | null;

  constructor(secret: string | null) {
    this.#secret = secret;
  }

  seal(keyName: string, text: string): string {
    return this.#secret === null ? text : `${SIGNED}${this.#mac(this.#secret, keyName, text)}:${text}`;
  }

  /** The text of a value read under `keyName`: with a secret, only when its signature verifies. */
  open(keyName: string, value: string): Opened {
    const signed = value.startsWith(SIGNED) && value.charAt(SIGNED.length + MAC_CHARACTERS) === ':';
    const text = signed ? value.slice(SIGNED.length + MAC_CHARACTERS + 1) : value;
    if (this.#secret === null) return { text };
    if (!signed) return { bad: 'unsigned', detail: 'no signature, and cache.redis.secret is set' };
    const mac = Buffer.from(value.slice(SIGNED.length, SIGNED.length + MAC_CHARACTERS));
    const expected = Buffer.from(this.#mac(this.#secret, keyName, text));
    if (mac.length !== expected.length || !timingSafeEqual(mac, expected)) return { bad: 'signature', detail: 'the signature does not verify with cache.redis.secret' };
    return { text };
  }

  #mac(secret: string, keyName: string, text: string): string {
    return createHmac('sha256', secret).update('compactor-value\0').update(keyName).update('\0').update(text).digest('base64url');
  }
}
