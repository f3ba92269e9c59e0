import { createHmac, timingSafeEqual } from 'node:crypto';
import { type Decoded, encodeEpoch, headerOf, readEpoch } from './epoch-codec.js';
import type { Epoch } from '../types.js';

/**
 * An epoch read from a shared store is checked, never trusted (issue 21 item
 * 6): anything that can write to Redis (a shared instance, another app, a
 * loose ACL) could otherwise put text into a tenant's next prompt, make every
 * request of a conversation fail (`replacement: [null, 5, "x"]`), drop or
 * repeat recent turns (`sourceLength: 1e9` or `-4`), or inflate 0.4 MB into
 * 400 MB. A value is used only when it inflates within `maxValueBytes`, parses
 * to what `EpochSchema` (types.ts) accepts and, with a secret, carries a
 * valid HMAC; anything else is a miss, reported with its reason.
 *
 * Signed values (a secret is configured): the encoding byte is upper case
 * (`J`, `Z`) and a 32-byte HMAC-SHA256 follows it, over the key prefix, the
 * flag, the encoding and the body; the body holds the epoch's own key, which
 * the lookup then requires to be the prefix hash it was found for. Without a
 * secret the store is trusted to hold what a replica wrote (the checks above
 * still bound what a value can do: it can only replace a history's prefix
 * with well-formed messages).
 */

const MAC_BYTES = 32;

export type { BadValueReason } from './bad-values.js';
export type { Decoded } from './epoch-codec.js';

export interface StoredEpochCodecOptions {
  /** Bound into every signature: a value signed for one deployment's prefix is not another's. */
  readonly keyPrefix: string;
  /** `cache.redis.secret`: when set, values are signed and unsigned or mis-signed ones are misses. */
  readonly secret: string | null;
  /** `cache.redis.max_value_bytes`: an epoch's JSON larger than this, inflated, is a miss. */
  readonly maxValueBytes: number;
}

export class StoredEpochCodec {
  readonly #options: StoredEpochCodecOptions;

  constructor(options: StoredEpochCodecOptions) {
    this.#options = options;
  }

  encode(epoch: Epoch): Buffer {
    const plain = encodeEpoch(epoch);
    const { secret } = this.#options;
    if (secret === null) return plain;
    const head = Buffer.from([plain[0]!, plain[1]! - 0x20]); // 'j' -> 'J', 'z' -> 'Z': signed
    const body = plain.subarray(2);
    return Buffer.concat([head, this.#mac(secret, head, body), body]);
  }

  decode(value: Buffer): Decoded {
    const header = headerOf(value);
    if (header === undefined) return { bad: 'encoding', detail: 'shorter than its header' };
    const { flag, encoding } = header;
    const { secret } = this.#options;
    let body = header.body;
    if (secret !== null) {
      if (encoding !== 'J' && encoding !== 'Z') return { bad: 'unsigned', detail: 'no signature, and cache.redis.secret is set' };
      const mac = body.subarray(0, MAC_BYTES);
      body = body.subarray(MAC_BYTES);
      const expected = this.#mac(secret, value.subarray(0, 2), body);
      if (mac.length !== MAC_BYTES || !timingSafeEqual(mac, expected)) return { bad: 'signature', detail: 'the signature does not verify with cache.redis.secret' };
    }
    return readEpoch(flag, encoding.toLowerCase(), body, this.#options.maxValueBytes);
  }

  #mac(secret: string, head: Buffer, body: Buffer): Buffer {
    return createHmac('sha256', secret).update('compactor-epoch\0').update(this.#options.keyPrefix).update('\0').update(head).update(body).digest();
  }
}
