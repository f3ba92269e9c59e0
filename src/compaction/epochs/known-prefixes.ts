import { createHash, hash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { findMessagesSpan } from '../../formats/registry.js';
import { isRealUserMessage } from '../../transcript/groups.js';
import type { ChatMessage } from '../../transcript/message.js';
import { type Slices, runNow, sliceEndsAt } from '../../transcript/slices.js';
import { canonicalText, extendPrefixHashes, prefixHashes } from './prefix-hash.js';

/**
 * A request of a known conversation is hashed only past what an earlier
 * request of it already hashed (issue 26 item 3). The prefix hash chain
 * costs one canonical text and one SHA-256 per message; an agent resends its
 * whole history every step, so a cached-epoch request spent most of its
 * hashing on messages the last request had hashed already.
 *
 * The proof that a prefix is the same is the client's own bytes: the record
 * holds the raw `messages` list an earlier request sent, from its `[` to the
 * end of its last message, and the next request's bytes are compared with
 * them (memcmp, some 1 µs for 36 KB); a list longer than
 * {@link HELD_LIST_MAX_BYTES} is held as its SHA-256 instead (58 µs for the
 * same 36 KB on this machine's OpenSSL, ~15 instructions a byte: issue 40).
 * The same bytes parse to the same messages
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

/**
 * What the records may hold in all: a 200-message conversation's record is about 12 KB and its held list some 50–200
 * KB more, so some 40–150 conversations at work at once (a server's slots are fewer); one that is forgotten costs its
 * next request a full hash, never a wrong chain.
 */
export const KNOWN_PREFIXES_MAX_BYTES = 8 * 1024 * 1024;

/**
 * A `messages` list up to this many bytes is held in its record and proved by comparing bytes; a longer one by its
 * SHA-256 (a 32 MiB body is not kept alive past its request). 256 KiB: own-cost.ts's 200 KB agent body fits, and 32
 * such records fill the bound.
 */
export const HELD_LIST_MAX_BYTES = 256 * 1024;

/**
 * Bytes of each message's own digest (the prefix-break ledger's, http/ledger/prefix-print.ts): 2^64 messages
 * before two collide by chance, far beyond one conversation.
 */
export const MESSAGE_DIGEST_BYTES = 8;

/** About what one record costs: the chain's strings (22 characters and a V8 header) and their slots, the messages' digests, plus the record. */
function recordBytes(record: KnownPrefix): number {
  // A held list may be a view: what it keeps alive is the whole memory it views (at most twice the list, #proofOf).
  return 200 + record.hashes.length * 56 + record.digests.length + (typeof record.proof === 'string' ? 0 : record.proof.buffer.byteLength);
}

interface KnownPrefix {
  /** How many messages the bytes below hold. */
  readonly count: number;
  /** How many bytes of the `messages` list, from its `[`, hold those messages. */
  readonly bytes: number;
  /** Those bytes themselves (a view of the body they came in), or their SHA-256 (base64url) when they are more than the held limit. */
  readonly proof: ListProof;
  /** The chain of the first `hashes.length - 1` of them (at least the head's, at most all). */
  readonly hashes: readonly string[];
  /** Each message's own digest, for the first `digests.length / MESSAGE_DIGEST_BYTES` of them (none, some or all). */
  readonly digests: Buffer;
  /** The body these bytes were last read from: the same body asked again (the ledger after the engine, a plan made again) is not hashed again. */
  readonly source: WeakRef<Buffer>;
}

/**
 * What one request's history is named by: its chain up to the head at least
 * (`hashes[0]` names the tenant and model, `hashes[head]` the conversation,
 * as the epochs and the dashboard name it), and each message's own digest.
 */
export interface ConversationPrint {
  readonly hashes: readonly string[];
  /** The head: the messages up to and including the first real user message (all, when there is none). */
  readonly head: number;
  /** Each message's digest, {@link MESSAGE_DIGEST_BYTES} each: SHA-256 of its canonical text, cut short. */
  readonly digests: Buffer;
}

/** A `messages` list's bytes as a record holds them: the bytes, or their SHA-256 (base64url). */
type ListProof = Buffer | string;

/** What the bytes proved of a request: the chain and digests an earlier request made of the same first messages. */
interface Proof {
  readonly head: number;
  readonly key: string;
  /** The head's chain, or the longer one the record held. */
  readonly hashes: string[];
  /** The record's digests of the same first messages (empty when none are known). */
  readonly digests: Buffer;
  /** What the record of this request will hold of its list's bytes. */
  readonly proof: ListProof;
  readonly listBytes: number;
}

const NO_DIGESTS = Buffer.alloc(0);

function isWhitespace(byte: number | undefined): boolean {
  return byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
}

function headOf(messages: readonly ChatMessage[]): number {
  const firstUser = messages.findIndex((message) => isRealUserMessage(message));
  return firstUser === -1 ? messages.length : firstUser + 1;
}

/** `digests` (of the first `digests.length / MESSAGE_DIGEST_BYTES` messages) completed to all of `messages`. */
/**
 * Characters of canonical text digested between two places a pause may come:
 * the print of a 32 MiB history held the loop 200–460 ms in one piece on a
 * busy machine (issue 34, planning's stalls).
 */
const SLICE_TEXT = 1024 * 1024;

/** `digests` completed for every message of `messages`, as steps: a pause after every MiB of text or SLICE_ITEMS messages. */
export function* completedDigestsSteps(digests: Buffer, messages: readonly ChatMessage[]): Slices<Buffer> {
  const known = Math.min(digests.length / MESSAGE_DIGEST_BYTES, messages.length);
  if (known === messages.length && digests.length === known * MESSAGE_DIGEST_BYTES) return digests;
  const all = Buffer.allocUnsafe(messages.length * MESSAGE_DIGEST_BYTES);
  digests.copy(all, 0, 0, known * MESSAGE_DIGEST_BYTES);
  let sincePause = 0;
  for (let index = known; index < messages.length; index++) {
    // The epochs' canonical text, not JSON: no escaping pass over a large result, and key order does not matter.
    const text = canonicalText(messages[index]);
    hash('sha256', text, 'buffer').copy(all, index * MESSAGE_DIGEST_BYTES, 0, MESSAGE_DIGEST_BYTES);
    sincePause += text.length;
    if (sincePause >= SLICE_TEXT || sliceEndsAt(index)) {
      sincePause = 0;
      yield;
    }
  }
  return all;
}

/** The print of `messages` made whole, with nothing remembered (a body whose messages are not its bytes'). */
export function conversationPrintOf(seed: { readonly tenant: string; readonly model: string }, messages: readonly ChatMessage[]): ConversationPrint {
  return runNow(conversationPrintSteps(seed, messages));
}

/** The same print as steps: a large history's digests are taken a slice at a time. */
export function* conversationPrintSteps(seed: { readonly tenant: string; readonly model: string }, messages: readonly ChatMessage[]): Slices<ConversationPrint> {
  const head = headOf(messages);
  return { hashes: prefixHashes(seed, messages, head), head, digests: yield* completedDigestsSteps(NO_DIGESTS, messages) };
}

export class KnownPrefixes {
  readonly #records: LRUCache<string, KnownPrefix>;
  /** Messages whose canonical text was hashed into the chain (the chain's own work), for tests and benches. */
  hashedMessages = 0;
  /** Messages whose own digest was taken (the ledger's), for tests and benches. */
  digestedMessages = 0;
  /** Bytes of `messages` lists put through SHA-256 to prove them (those longer than the held limit), for tests and benches. */
  hashedListBytes = 0;
  readonly #heldMax: number;
  /** The body read last and its conversation's key: the plan after the print finds its record without hashing the head again. */
  #last: { readonly source: WeakRef<Buffer>; readonly seed: { readonly tenant: string; readonly model: string }; readonly key: string } | undefined;

  constructor(maxBytes: number = KNOWN_PREFIXES_MAX_BYTES, heldMax: number = HELD_LIST_MAX_BYTES) {
    this.#heldMax = heldMax;
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
    const proof = this.#prove(seed, messages, source);
    if (proof === undefined) {
      this.hashedMessages += messages.length;
      return prefixHashes(seed, messages);
    }
    const { hashes } = proof;
    this.hashedMessages += messages.length - (hashes.length - 1);
    extendPrefixHashes(hashes, messages, messages.length);
    this.#remember(proof, messages.length, hashes, proof.digests, source!);
    return hashes;
  }

  /**
   * The request's {@link ConversationPrint}: the head's chain and each
   * message's digest, taken only for the messages an earlier request of the
   * conversation did not hold (proved as {@link hashesOf} proves them), so an
   * agent's next step digests its new messages alone.
   */
  printOf(seed: { readonly tenant: string; readonly model: string }, messages: readonly ChatMessage[], source?: Buffer): ConversationPrint {
    return runNow(this.printSteps(seed, messages, source));
  }

  /** {@link printOf} as steps: what is digested anew (a whole first-seen history) is taken a slice at a time. */
  *printSteps(seed: { readonly tenant: string; readonly model: string }, messages: readonly ChatMessage[], source?: Buffer): Slices<ConversationPrint> {
    const proof = this.#prove(seed, messages, source);
    if (proof === undefined) {
      this.hashedMessages += headOf(messages);
      this.digestedMessages += messages.length;
      return yield* conversationPrintSteps(seed, messages);
    }
    this.digestedMessages += Math.max(0, messages.length - proof.digests.length / MESSAGE_DIGEST_BYTES);
    const digests = yield* completedDigestsSteps(proof.digests, messages);
    this.#remember(proof, messages.length, proof.hashes, digests, source!);
    return { hashes: proof.hashes, head: proof.head, digests };
  }

  /**
   * The head's chain and what the record of its conversation proves of the
   * rest: undefined when `source` cannot prove anything (none, no `messages`
   * list in it, no messages).
   */
  #prove(seed: { readonly tenant: string; readonly model: string }, messages: readonly ChatMessage[], source: Buffer | undefined): Proof | undefined {
    const span = source === undefined ? undefined : findMessagesSpan(source);
    if (source === undefined || span === undefined || messages.length === 0) return undefined;
    const head = headOf(messages);
    // The last message's closing brace: the list's `]`, then white space, back from the span's end.
    let end = span.end - 2;
    while (isWhitespace(source[end])) end--;
    const listBytes = end + 1 - span.start;
    // These very bytes were read last (the plan after the print, a plan made again after a refusal): proved then,
    // and the record holds at least the head's chain. The same body parses to the same messages.
    const last = this.#last;
    const again = last !== undefined && last.source.deref() === source && last.seed.tenant === seed.tenant && last.seed.model === seed.model ? this.#records.get(last.key) : undefined;
    if (again !== undefined && again.source.deref() === source && again.count === messages.length && again.bytes === listBytes && again.hashes.length > head) {
      return { head, key: last!.key, hashes: again.hashes.slice(), digests: again.digests, proof: again.proof, listBytes };
    }
    const headHashes = prefixHashes(seed, messages, head);
    this.hashedMessages += head;
    const key = headHashes[head]!;
    this.#last = { source: new WeakRef(source), seed: { tenant: seed.tenant, model: seed.model }, key };
    const known = this.#records.get(key);
    const longer = (record: KnownPrefix): string[] => (record.hashes.length > headHashes.length ? record.hashes.slice() : headHashes);
    const list = source.subarray(span.start, span.start + listBytes);
    const fits = known !== undefined && known.count > head && known.count <= messages.length && known.bytes <= listBytes;
    // Same bytes, same messages: their chain and digests are the ones already made. Else made again from the messages.
    const { proved, proof } = fits ? this.#proveAgainst(known, list) : { proved: false, proof: this.#proofOf(list) };
    if (!proved) return { head, key, hashes: headHashes, digests: NO_DIGESTS, proof, listBytes };
    return { head, key, hashes: longer(known!), digests: known!.digests.subarray(0, Math.min(known!.digests.length, known!.count * MESSAGE_DIGEST_BYTES)), proof, listBytes };
  }

  /**
   * What a record will hold of `list`: the bytes when they are few enough, else their SHA-256. The bytes are a view
   * of the client's body (never changed in place: the receiver copies it out of the connection's buffers), not a
   * copy: a fresh 36 KB allocation a request cost as much CPU as the SHA-256 it saves (50 µs against 41, much of it
   * the kernel's page faults, which no instruction count shows). Only a list that is less than half of the memory
   * it views is copied out: a small body lives in Buffer's shared pool (8 KiB slabs on Node 20, 64 KiB on Node 26),
   * a body's tools can dwarf its messages, and a record must not keep that memory alive nor count it against the
   * bound (at 64 KiB a 2 KB record, 8 MiB would hold 128 conversations). Such a copy is small.
   */
  #proofOf(list: Buffer): ListProof {
    if (list.length > this.#heldMax) {
      this.hashedListBytes += list.length;
      return hash('sha256', list, 'base64url');
    }
    if (list.buffer.byteLength <= 2 * list.length) return list;
    const own = Buffer.allocUnsafeSlow(list.length);
    list.copy(own);
    return own;
  }

  /**
   * Whether `list` starts with the bytes `known` holds, and what the new record will hold of `list`. A digest
   * proves by hashing the same first bytes, and the hash goes on over the rest for the new record's digest when
   * it is one too: every byte is hashed once.
   */
  #proveAgainst(known: KnownPrefix, list: Buffer): { proved: boolean; proof: ListProof } {
    const prefix = list.subarray(0, known.bytes);
    if (typeof known.proof !== 'string') return { proved: prefix.equals(known.proof), proof: this.#proofOf(list) };
    const hasher = createHash('sha256').update(prefix);
    this.hashedListBytes += prefix.length;
    const proved = hasher.copy().digest('base64url') === known.proof;
    if (list.length <= this.#heldMax) return { proved, proof: this.#proofOf(list) };
    this.hashedListBytes += list.length - prefix.length;
    return { proved, proof: hasher.update(list.subarray(known.bytes)).digest('base64url') };
  }

  #remember(proof: Proof, count: number, hashes: readonly string[], digests: Buffer, source: Buffer): void {
    this.#records.set(proof.key, { count, bytes: proof.listBytes, proof: proof.proof, hashes, digests, source: new WeakRef(source) });
  }
}

