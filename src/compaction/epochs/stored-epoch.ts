import { createHmac, timingSafeEqual } from 'node:crypto';
import { inflateRawSync } from 'node:zlib';
import { z } from 'zod';
import { ChatMessageSchema } from '../../transcript/message.js';
import { encodeEpoch } from './epoch-codec.js';
import type { Epoch } from '../types.js';
import { STORED_TIERS } from '../policy/tiers/list.js';

/**
 * An epoch read from a shared store is checked, never trusted (issue 21 item
 * 6): anything that can write to Redis (a shared instance, another app, a
 * loose ACL) could otherwise put text into a tenant's next prompt, make every
 * request of a conversation fail (`replacement: [null, 5, "x"]`), drop or
 * repeat recent turns (`sourceLength: 1e9` or `-4`), or inflate 0.4 MB into
 * 400 MB. A value is used only when it inflates within `maxValueBytes`, parses
 * to what {@link StoredEpochSchema} accepts and, with a secret, carries a
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

/** The epoch as the code trusts it: every length a count within the history, every index within the replacement. */
export const StoredEpochSchema = z
  .strictObject({
    key: z.string().regex(/^[\w-]{16,128}$/, 'not a prefix hash'),
    sourceLength: z.number().int().nonnegative(),
    seenLength: z.number().int().positive(),
    replacement: z.array(ChatMessageSchema),
    marked: z.array(z.number().int().nonnegative()).optional(),
    notes: z.string().nullable(),
    // The epoch's tier, under its field's name before tiers were a list (what stored epochs of either version hold).
    strategy: z.enum(STORED_TIERS),
    report: z.string(),
    expiresAt: z.number().finite().optional(),
  })
  .refine((epoch) => epoch.sourceLength <= epoch.seenLength, 'sourceLength is beyond seenLength')
  .refine((epoch) => (epoch.marked ?? []).every((index) => index < epoch.replacement.length), 'a marked index is outside the replacement');

export type BadValueReason = 'unsigned' | 'signature' | 'too-large' | 'encoding' | 'json' | 'schema';

export interface StoredEpochCodecOptions {
  /** Bound into every signature: a value signed for one deployment's prefix is not another's. */
  readonly keyPrefix: string;
  /** `cache.redis.secret`: when set, values are signed and unsigned or mis-signed ones are misses. */
  readonly secret: string | null;
  /** `cache.redis.max_value_bytes`: an epoch's JSON larger than this, inflated, is a miss. */
  readonly maxValueBytes: number;
}

export type Decoded = { readonly epoch: Epoch } | { readonly bad: BadValueReason; readonly detail: string };

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
    if (value.length < 2) return { bad: 'encoding', detail: 'shorter than its header' };
    const flag = String.fromCharCode(value[0]!);
    const encoding = String.fromCharCode(value[1]!);
    const { secret } = this.#options;
    let body = value.subarray(2);
    if (secret !== null) {
      if (encoding !== 'J' && encoding !== 'Z') return { bad: 'unsigned', detail: 'no signature, and cache.redis.secret is set' };
      const mac = body.subarray(0, MAC_BYTES);
      body = body.subarray(MAC_BYTES);
      const expected = this.#mac(secret, value.subarray(0, 2), body);
      if (mac.length !== MAC_BYTES || !timingSafeEqual(mac, expected)) return { bad: 'signature', detail: 'the signature does not verify with cache.redis.secret' };
    }
    const kind = encoding.toLowerCase();
    let json: Buffer;
    try {
      if (kind === 'z') json = inflateRawSync(body, { maxOutputLength: this.#options.maxValueBytes });
      else if (kind === 'j') json = body;
      else return { bad: 'encoding', detail: `unknown encoding ${JSON.stringify(encoding)}` };
    } catch {
      return { bad: 'too-large', detail: `inflates past cache.redis.max_value_bytes (${this.#options.maxValueBytes}) or is not deflate data` };
    }
    if (json.length > this.#options.maxValueBytes) return { bad: 'too-large', detail: `larger than cache.redis.max_value_bytes (${this.#options.maxValueBytes})` };
    let parsed: unknown;
    try {
      parsed = JSON.parse(json.toString('utf8'));
    } catch {
      return { bad: 'json', detail: 'not JSON' };
    }
    const checked = StoredEpochSchema.safeParse(parsed);
    if (!checked.success) {
      const issue = checked.error.issues[0]!;
      return { bad: 'schema', detail: `${issue.path.join('.') || 'value'}: ${issue.message}` };
    }
    // The replacement as stored, in its own key order: zod's output puts each message's keys in the schema's order, so a
    // replica reading an epoch would forward other bytes than the one that wrote it. Every schema is loose and transforms
    // nothing, so once checked the two hold the same values.
    const epoch = withoutUndefined({ ...checked.data, replacement: (parsed as typeof checked.data).replacement });
    return { epoch: flag === 'p' ? { ...epoch, pending: true } : epoch };
  }

  #mac(secret: string, head: Buffer, body: Buffer): Buffer {
    return createHmac('sha256', secret).update('compactor-epoch\0').update(this.#options.keyPrefix).update('\0').update(head).update(body).digest();
  }
}

/** zod leaves absent optional keys out already; this narrows the type to what `exactOptionalPropertyTypes` wants. */
function withoutUndefined(data: z.infer<typeof StoredEpochSchema>): Epoch {
  const { marked, expiresAt, strategy, ...rest } = data;
  return { ...rest, tier: strategy, ...(marked === undefined ? {} : { marked }), ...(expiresAt === undefined ? {} : { expiresAt }) };
}
