import { hash } from 'node:crypto';
import { type ConversationPrint, MESSAGE_DIGEST_BYTES, conversationPrintSteps } from '../../compaction/epochs/known-prefixes.js';
import { canonicalText } from '../../compaction/epochs/prefix-hash.js';
import { isMarked } from '../../transcript/marks.js';
import { contentText, type ChatMessage } from '../../transcript/message.js';
import { MARKER_PREFIX } from '../../transcript/compress/markers.js';
import { type Slices, runNow, sliceEndsAt } from '../../transcript/slices.js';
import { estimateMessageTokens } from '../../transcript/tokens.js';

/**
 * What the prefix-break ledger (prefix-breaks.ts) keeps of one forwarded
 * request, taken when it is forwarded: a digest of each message the client
 * sent and of each message forwarded, what compactor wrote at each forwarded
 * index (a summary, a truncation notice, a compressed or pruned result, a
 * repair's stand-in), and each forwarded message's estimated tokens. Never a
 * message's text: 8 bytes a message, so a 500-message history is 4 KB.
 */

/** Bytes of each message's digest: 2^64 messages before two collide by chance, far beyond one conversation. */
export const DIGEST_BYTES = MESSAGE_DIGEST_BYTES;

/** What compactor wrote at a forwarded index (0: the client's message as it sent it). */
export const WRITTEN = { none: 0, summary: 1, truncation: 2, compression: 3, prune: 4, repair: 5 } as const;
export type Written = (typeof WRITTEN)[keyof typeof WRITTEN];

export interface PrefixPrint {
  /** The conversation: tenant, model and its messages up to its first real user message. */
  readonly key: string;
  /** Tenant and model alone: a history whose head the client edited is looked for among this owner's conversations. */
  readonly owner: string;
  readonly client: Buffer;
  /** The same Buffer as `client` when nothing was changed. */
  readonly forwarded: Buffer;
  readonly written: Uint8Array;
  /** Estimated tokens of each forwarded message (bytes/4 and framing; the ledger scales them by what the upstream counted). */
  readonly tokens: Uint32Array;
}

// The elision marker of a pruned result (transcript/prune.ts): ` bytes elided …]`.
const ELIDED = ' bytes elided …]';

/** What the print takes of a message compactor wrote: its digest, what it wrote, its estimated tokens. */
interface WrittenPrint {
  readonly digest: Buffer;
  readonly written: Written;
  readonly tokens: number;
}

/**
 * The prints of messages compactor wrote, by the message: a cached epoch's summary and what it kept are the very same
 * objects in every request that applies it, and one of 21 KB was digested anew each request (issue 40). A message is
 * never changed in place (transcript/message.ts), so its print holds; gone with the epoch that holds the message.
 */
const writtenPrints = new WeakMap<ChatMessage, WrittenPrint>();

function writtenPrintOf(message: ChatMessage): WrittenPrint {
  let print = writtenPrints.get(message);
  if (print === undefined) {
    const digest = Buffer.from(hash('sha256', canonicalText(message), 'buffer').subarray(0, DIGEST_BYTES));
    print = { digest, written: writtenOf(message), tokens: Math.round(estimateMessageTokens(message)) };
    writtenPrints.set(message, print);
  }
  return print;
}

/**
 * The forwarded messages' digests: a message forwarded as the client sent it (the same object) has the
 * client's digest already; only what compactor wrote is digested here, once (writtenPrintOf).
 */
function* forwardedDigestsSteps(indexOf: ReadonlyMap<ChatMessage, number>, clientDigests: Buffer, forwarded: readonly ChatMessage[]): Slices<Buffer> {
  const digests = Buffer.allocUnsafe(forwarded.length * DIGEST_BYTES);
  for (const [index, message] of forwarded.entries()) {
    const at = indexOf.get(message);
    if (at !== undefined) clientDigests.copy(digests, index * DIGEST_BYTES, at * DIGEST_BYTES, (at + 1) * DIGEST_BYTES);
    else writtenPrintOf(message).digest.copy(digests, index * DIGEST_BYTES);
    if (sliceEndsAt(index)) yield;
  }
  return digests;
}

/** What compactor wrote in a forwarded message it changed; `none` for the client's own. */
function writtenOf(message: ChatMessage): Written {
  if (isMarked(message, 'summary') || isMarked(message, 'steps')) return WRITTEN.summary;
  if (isMarked(message, 'truncated')) return WRITTEN.truncation;
  if (isMarked(message, 'missing')) return WRITTEN.repair;
  const text = contentText(message.content);
  if (text.includes(MARKER_PREFIX)) return WRITTEN.compression;
  if (text.includes(ELIDED)) return WRITTEN.prune;
  return WRITTEN.none;
}

/**
 * The print of a request whose `forwarded` messages went upstream in place of the client's `client` ones.
 * `conversation`: the client history's print as the request's read took it (KnownPrefixes.printOf: only
 * what an earlier request did not hold was digested); made whole here when not given.
 */
export function prefixPrintOf(tenant: string, model: string, client: readonly ChatMessage[], forwarded: readonly ChatMessage[], conversation?: ConversationPrint): PrefixPrint {
  return runNow(prefixPrintSteps(tenant, model, client, forwarded, conversation));
}

/**
 * The same print as steps (transcript/slices.ts): what a large history still needs digested and estimated is
 * taken a slice at a time, the loop turning between (issue 34: the print of a 32 MiB history held it 200–460 ms).
 */
export function* prefixPrintSteps(
  tenant: string,
  model: string,
  client: readonly ChatMessage[],
  forwarded: readonly ChatMessage[],
  given?: ConversationPrint,
): Slices<PrefixPrint> {
  const conversation = given ?? (yield* conversationPrintSteps({ tenant, model }, client));
  const clientDigests = conversation.digests;
  // Each client message's index, when compactor changed the history: what it forwarded as sent is the same object.
  const theClients = forwarded === client ? null : new Map(client.map((message, index) => [message, index]));
  const forwardedDigests = theClients === null ? clientDigests : yield* forwardedDigestsSteps(theClients, clientDigests, forwarded);
  const written = new Uint8Array(forwarded.length);
  const tokens = new Uint32Array(forwarded.length);
  for (const [index, message] of forwarded.entries()) {
    // A mark is genuine only where compactor wrote it: in what it changed, never in what the client sent as it was.
    const wrote = theClients !== null && !theClients.has(message) ? writtenPrintOf(message) : undefined;
    tokens[index] = wrote === undefined ? Math.round(estimateMessageTokens(message)) : wrote.tokens;
    if (wrote !== undefined) written[index] = wrote.written;
    if (sliceEndsAt(index)) yield;
  }
  // The chain names them as the epochs and the dashboard do: `hashes[0]` the tenant and model, `hashes[head]` the conversation.
  return { key: conversation.hashes[conversation.head]!, owner: conversation.hashes[0]!, client: clientDigests, forwarded: forwardedDigests, written, tokens };
}
