import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { findMessagesSpan } from '../../formats/registry.js';
import { isRealUserMessage } from '../../transcript/groups.js';
import type { ChatMessage } from '../../transcript/message.js';
import { extendPrefixHashes, prefixHashes } from './prefix-hash.js';

/**
 * A request of a known conversation is hashed only past what an earlier
 * request of it already hashed (issue 26 item 3). The prefix hash chain
 * costs one canonical text and one SHA-256 per message; an agent resends its
 * whole history every step, so a cached-epoch request spent most of its
 * hashing on messages the last request had hashed already.
 *
 * The proof that a prefix is the same is the client's own bytes: one native
 * SHA-256 over the raw `messages` list, from its `[` to the end of the last
 * message an earlier request held. The same bytes parse to the same messages
 * (each is an object, so its closing brace ends it), so their chain is the
 * same; one byte different and the digests differ, and the chain is made
 * again from the messages. Only for bodies whose `messages` are exactly what
 * those bytes parse to (a chat completions body whose pairs needed no
 * repair): another format's chat view, or a repaired history, is hashed
 * whole as before.
 *
 * Kept per conversation, found by the chain up to its first real user
 * message (made first, as the dashboard names conversations): conversations
 * that start alike share a record and each miss replaces it, which costs a
 * full hash, never a wrong chain. Bounded in bytes, the least recently used
 * forgotten first.
 */

/** What the records may hold in all: a 200-message conversation's record is about 10 KB, so some 800 conversations. */
export const KNOWN_PREFIXES_MAX_BYTES = 8 * 1024 * 1024;

/** About what one record costs: the chain's strings (22 characters and a V8 header) and their slots, plus the record. */
function recordBytes(record: KnownPrefix): number {
  return 200 + record.hashes.length * 56;
}

interface KnownPrefix {
  /** How many messages the chain names (`hashes.length - 1`). */
  readonly count: number;
  /** How many bytes of the `messages` list, from its `[`, hold those messages. */
  readonly bytes: number;
  /** SHA-256 (base64url) of those bytes. */
  readonly digest: string;
  readonly hashes: readonly string[];
}

function isWhitespace(byte: number | undefined): boolean {
  return byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
}

export class KnownPrefixes {
  readonly #records: LRUCache<string, KnownPrefix>;
  /** Messages whose canonical text was hashed (the chain's own work), for tests and benches. */
  hashedMessages = 0;

  constructor(maxBytes: number = KNOWN_PREFIXES_MAX_BYTES) {
    this.#records = new LRUCache<string, KnownPrefix>({ maxSize: maxBytes, sizeCalculation: recordBytes });
  }

  /** The records' size in bytes, about. */
  get bytes(): number {
    return this.#records.calculatedSize;
  }

  /**
   * The chain `[h0 … hn]` of `messages`, as {@link prefixHashes} makes it.
   * `source`: the body `messages` were parsed from, when they are exactly
   * what its top-level `messages` parses to; without it the chain is made whole.
   */
  hashesOf(seed: { readonly tenant: string; readonly model: string }, messages: readonly ChatMessage[], source?: Buffer): string[] {
    const span = source === undefined ? undefined : findMessagesSpan(source);
    if (source === undefined || span === undefined || messages.length === 0) return this.#whole(seed, messages);
    const firstUser = messages.findIndex((message) => isRealUserMessage(message));
    const head = firstUser === -1 ? messages.length : firstUser + 1;
    let hashes = prefixHashes(seed, messages, head);
    this.hashedMessages += head;
    const key = hashes[head]!;
    // The last message's closing brace: the list's `]`, then white space, back from the span's end.
    let end = span.end - 2;
    while (isWhitespace(source[end])) end--;
    const listBytes = end + 1 - span.start;
    const hasher = createHash('sha256');
    const known = this.#records.get(key);
    let from = 0;
    if (known !== undefined && known.count > head && known.count <= messages.length && known.bytes <= listBytes) {
      hasher.update(source.subarray(span.start, span.start + known.bytes));
      // Same bytes, same messages: their chain is the one already made. Else made again from the messages below.
      if (hasher.copy().digest('base64url') === known.digest) hashes = known.hashes.slice();
      from = known.bytes;
    }
    hasher.update(source.subarray(span.start + from, span.start + listBytes));
    this.hashedMessages += messages.length - (hashes.length - 1);
    extendPrefixHashes(hashes, messages, messages.length);
    this.#records.set(key, { count: messages.length, bytes: listBytes, digest: hasher.digest('base64url'), hashes });
    return hashes;
  }

  #whole(seed: { readonly tenant: string; readonly model: string }, messages: readonly ChatMessage[]): string[] {
    this.hashedMessages += messages.length;
    return prefixHashes(seed, messages);
  }
}
