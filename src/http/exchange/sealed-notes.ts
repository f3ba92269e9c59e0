import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { type ChatMessage, isChatMessage } from '../../transcript/message.js';

/**
 * compactor's own sealed token: the `encrypted_content` of the `compaction`
 * item `POST /v1/responses/compact` answers, which the client carries into
 * later `/v1/responses` requests. It holds the notes themselves, and the
 * messages the summary kept raw after them (the working set's newest file
 * reads, a long turn's last steps), sealed with AES-256-GCM, so it is both
 * secret and authenticated, bound to the tenant that asked:
 * an item altered, made by another deployment (another key), by OpenAI, or
 * carried by another credential does not open, and its request gets a 400.
 *
 * The key is derived (HKDF-SHA256) from `compaction.seal_key`, else from
 * `cache.redis.secret`; without either it is random per process, so an item
 * opens only in the process that sealed it (a restart or another replica
 * refuses it, and the client compacts again from its own history).
 */

/** How a sealed token begins: its version, so a later format can be told apart. */
export const SEALED_PREFIX = 'compactor-v1.';

const IV_BYTES = 12;
const TAG_BYTES = 16;
/** The context of the key derivation: a key for these items only, never the Redis signatures' own. */
const KEY_INFO = 'compactor responses compaction item v1';

/** Why a token did not open: not compactor's at all (`foreign`), or compactor's shape failing its authentication (`altered`). */
export type UnsealFailure = 'foreign' | 'altered';

/** What a token holds: the notes, and the messages kept raw after them (no user message: the client keeps its own). */
export interface SealedNotes {
  readonly notes: string;
  readonly kept: readonly ChatMessage[];
}

export type Unsealed = ({ readonly ok: true } & SealedNotes) | { readonly ok: false; readonly failure: UnsealFailure };

export class NotesSeal {
  readonly #key: Buffer;
  /** Whether the key outlives the process (configured), or is this process's own. */
  readonly configured: boolean;

  constructor(secret: string | null) {
    this.configured = secret !== null;
    this.#key = secret === null ? randomBytes(32) : Buffer.from(hkdfSync('sha256', secret, 'compactor', KEY_INFO, 32));
  }

  /** The notes (and the messages kept after them) sealed for `tenant`. */
  seal(sealed: SealedNotes, tenant: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv);
    cipher.setAAD(Buffer.from(`${SEALED_PREFIX}${tenant}`));
    const body = Buffer.concat([cipher.update(JSON.stringify({ notes: sealed.notes, kept: sealed.kept }), 'utf8'), cipher.final()]);
    return `${SEALED_PREFIX}${Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url')}`;
  }

  /** The notes of a token sealed for `tenant` by this key, or why not. */
  open(token: unknown, tenant: string): Unsealed {
    if (typeof token !== 'string' || !token.startsWith(SEALED_PREFIX)) return { ok: false, failure: 'foreign' };
    const encoded = token.slice(SEALED_PREFIX.length);
    if (!/^[A-Za-z0-9_-]*$/.test(encoded)) return { ok: false, failure: 'altered' };
    const bytes = Buffer.from(encoded, 'base64url');
    if (bytes.length < IV_BYTES + TAG_BYTES) return { ok: false, failure: 'altered' };
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.#key, bytes.subarray(0, IV_BYTES));
      decipher.setAAD(Buffer.from(`${SEALED_PREFIX}${tenant}`));
      decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
      const plain = Buffer.concat([decipher.update(bytes.subarray(IV_BYTES, bytes.length - TAG_BYTES)), decipher.final()]).toString('utf8');
      const { notes, kept } = JSON.parse(plain) as { notes?: unknown; kept?: unknown };
      // Authenticated, so only this code wrote it; checked all the same, as every value read back is.
      return typeof notes === 'string' && Array.isArray(kept) && kept.every(isChatMessage) ? { ok: true, notes, kept: kept as ChatMessage[] } : { ok: false, failure: 'altered' };
    } catch {
      // The tag did not verify: altered, another key, or another tenant's.
      return { ok: false, failure: 'altered' };
    }
  }
}
