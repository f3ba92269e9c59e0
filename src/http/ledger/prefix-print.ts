import { createHash } from 'node:crypto';
import { canonicalText } from '../../compaction/epochs/prefix-hash.js';
import { isRealUserMessage } from '../../transcript/groups.js';
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
export const DIGEST_BYTES = 8;

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

/**
 * Characters of canonical text hashed between two places a pause may come:
 * the print of a 32 MiB history held the loop 200–460 ms in one piece on a
 * busy machine (issue 34, planning's stalls), the largest single stall left
 * after the parse in slices.
 */
const SLICE_TEXT = 1024 * 1024;

function* digestSteps(messages: readonly ChatMessage[]): Slices<Buffer> {
  const digests = Buffer.allocUnsafe(messages.length * DIGEST_BYTES);
  let sincePause = 0;
  for (const [index, message] of messages.entries()) {
    // The epochs' canonical text, not JSON: no escaping pass over a large result, and key order does not matter.
    const text = canonicalText(message);
    createHash('sha256').update(text).digest().copy(digests, index * DIGEST_BYTES, 0, DIGEST_BYTES);
    sincePause += text.length;
    if (sincePause >= SLICE_TEXT || sliceEndsAt(index)) {
      sincePause = 0;
      yield;
    }
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

/** The print of a request whose `forwarded` messages went upstream in place of the client's `client` ones. */
export function prefixPrintOf(tenant: string, model: string, client: readonly ChatMessage[], forwarded: readonly ChatMessage[]): PrefixPrint {
  return runNow(prefixPrintSteps(tenant, model, client, forwarded));
}

/** The same print as steps (transcript/slices.ts): a large history's is taken a slice at a time, the loop turning between. */
export function* prefixPrintSteps(tenant: string, model: string, client: readonly ChatMessage[], forwarded: readonly ChatMessage[]): Slices<PrefixPrint> {
  const clientDigests = yield* digestSteps(client);
  const same = forwarded === client;
  const forwardedDigests = same ? clientDigests : yield* digestSteps(forwarded);
  const written = new Uint8Array(forwarded.length);
  const tokens = new Uint32Array(forwarded.length);
  const theClients = same ? null : new Set(client);
  for (const [index, message] of forwarded.entries()) {
    tokens[index] = Math.round(estimateMessageTokens(message));
    // A mark is genuine only where compactor wrote it: in what it changed, never in what the client sent as it was.
    if (theClients !== null && !theClients.has(message)) written[index] = writtenOf(message);
    if (sliceEndsAt(index)) yield;
  }
  const firstUser = client.findIndex((message) => isRealUserMessage(message));
  const headEnd = (firstUser === -1 ? client.length : firstUser + 1) * DIGEST_BYTES;
  const owner = createHash('sha256').update(`${tenant}\n${model}\n`).digest('hex').slice(0, 16);
  const key = createHash('sha256').update(owner).update(clientDigests.subarray(0, headEnd)).digest('hex').slice(0, 16);
  return { key, owner, client: clientDigests, forwarded: forwardedDigests, written, tokens };
}
